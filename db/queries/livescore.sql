-- Live scoring: scorers per experiment or alias, the feedback they sample
-- and the scores they keep.

-- name: LiveScorerInsertForExperiment :one
-- An upsert: the experiment keeps one scorer, changed in place.
-- A new scorer starts sampling the feedback that arrives from now on.
INSERT INTO live_scorers (org_id, experiment_id, scorer, endpoint, embeddings_endpoint, template, rate, enabled, cursor_at, created_by_label)
VALUES (@org_id, @experiment_id, @scorer, @endpoint, @embeddings_endpoint, @template, @rate, @enabled, now(), @created_by_label)
ON CONFLICT (experiment_id) WHERE experiment_id IS NOT NULL
DO UPDATE SET scorer = EXCLUDED.scorer, endpoint = EXCLUDED.endpoint, embeddings_endpoint = EXCLUDED.embeddings_endpoint,
    template = EXCLUDED.template, rate = EXCLUDED.rate, enabled = EXCLUDED.enabled, updated_at = now()
RETURNING *;

-- name: LiveScorerInsertForAlias :one
INSERT INTO live_scorers (org_id, registered_model_id, alias, scorer, endpoint, embeddings_endpoint, template, rate, enabled, cursor_at, created_by_label)
VALUES (@org_id, @registered_model_id, @alias, @scorer, @endpoint, @embeddings_endpoint, @template, @rate, @enabled, now(), @created_by_label)
ON CONFLICT (registered_model_id, alias) WHERE registered_model_id IS NOT NULL
DO UPDATE SET scorer = EXCLUDED.scorer, endpoint = EXCLUDED.endpoint, embeddings_endpoint = EXCLUDED.embeddings_endpoint,
    template = EXCLUDED.template, rate = EXCLUDED.rate, enabled = EXCLUDED.enabled, updated_at = now()
RETURNING *;

-- name: LiveScorerList :many
-- The organisation's scorers with what each scored, and what it cost.
SELECT s.*, coalesce(e.key, '')::text AS experiment_key, coalesce(m.name, '')::text AS model_name,
       coalesce(c.scored, 0)::bigint AS scored, coalesce(c.pending, 0)::bigint AS pending,
       coalesce(c.skipped, 0)::bigint AS skipped, coalesce(c.flagged, 0)::bigint AS flagged,
       coalesce(c.cost_micros, 0)::bigint AS cost_micros
FROM live_scorers s
LEFT JOIN experiments e ON e.id = s.experiment_id
LEFT JOIN registered_models m ON m.id = s.registered_model_id
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE status = 'scored') AS scored, count(*) FILTER (WHERE status = 'pending') AS pending,
           count(*) FILTER (WHERE status IN ('skipped', 'invalid')) AS skipped,
           count(*) FILTER (WHERE status = 'scored' AND safety_flag) AS flagged, sum(cost_micros) AS cost_micros
    FROM live_scores l WHERE l.scorer_id = s.id
) c ON true
WHERE s.org_id = @org_id
ORDER BY s.created_at;

-- name: LiveScorerListEnabled :many
-- Every organisation's scorers that sample, for the periodic job.
SELECT * FROM live_scorers WHERE enabled ORDER BY created_at;

-- name: LiveScorerGet :one
SELECT * FROM live_scorers WHERE id = @id;

-- name: LiveScorerUpdateCursor :exec
UPDATE live_scorers SET cursor_at = @cursor_at, cursor_id = @cursor_id WHERE id = @id;

-- name: LiveFeedbackListExperiment :many
-- An experiment's feedback after the cursor and before until, oldest first.
SELECT id, created_at FROM feedback
WHERE org_id = @org_id AND experiment_id = @experiment_id AND created_at < @until
  AND (created_at, id) > (@cursor_at::timestamptz, @cursor_id::uuid)
ORDER BY created_at, id LIMIT @row_limit;

-- name: LiveFeedbackListModels :many
-- Feedback that names one of the models after the cursor and before until,
-- oldest first.
SELECT id, created_at FROM feedback
WHERE org_id = @org_id AND model = ANY(@models::text[]) AND created_at < @until
  AND (created_at, id) > (@cursor_at::timestamptz, @cursor_id::uuid)
ORDER BY created_at, id LIMIT @row_limit;

-- name: ModelVersionListServedNames :many
-- The names feedback may give a version by: its model id and the names its
-- served deployments are called under.
SELECT mv.model_id::text AS name FROM model_versions mv WHERE mv.org_id = @org_id AND mv.id = @version_id
UNION
SELECT d.served_name FROM deployments d
WHERE d.org_id = @org_id AND d.version_id = @version_id AND d.served_name <> '' AND d.status = 'succeeded' AND d.unloaded_at IS NULL;

-- name: LiveScoreInsertPending :execrows
-- A score is kept in the partition of its feedback's month.
INSERT INTO live_scores (scorer_id, feedback_id, org_id, feedback_at)
SELECT @scorer_id, k.id, @org_id, k.created_at FROM feedback_keys k
WHERE k.id = ANY(@feedback_ids::uuid[]) AND k.org_id = @org_id
ON CONFLICT DO NOTHING;

-- name: LiveScoreListPending :many
-- Sampled answers still to score and not claimed by a scorer at work (a
-- claim older than ten minutes, or made before @taken_over_before, is a
-- scorer that died), oldest first, with what the scorer reads: the
-- feedback's query, answer, reference and context, or the context of the
-- best-of-N call the feedback names by trace_id when it has none of its own.
SELECT l.feedback_id, f.query, f.response, f.correction,
       (CASE WHEN f.context = '{}'::jsonb THEN coalesce(b.context, f.context) ELSE f.context END)::jsonb AS context
FROM live_scores l JOIN feedback f ON f.id = l.feedback_id
LEFT JOIN LATERAL (
    SELECT r.context FROM best_of_n_responses r
    WHERE r.org_id = f.org_id
      AND r.id = trace_selection_id(f.trace_id)
) b ON true
WHERE l.scorer_id = @scorer_id AND l.status = 'pending'
  AND (l.scored_at IS NULL OR l.scored_at < greatest(now() - interval '10 minutes', @taken_over_before::timestamptz))
ORDER BY l.created_at, l.feedback_id LIMIT @row_limit;

-- name: LiveScoreUpdateClaim :execrows
-- Claims a pending answer for scoring, in one statement: of scorers that
-- race for it, one claims it and the others find no row. The claim is the
-- pending row's scored_at; a claim older than ten minutes, or made
-- before @taken_over_before, is taken over.
UPDATE live_scores SET scored_at = now()
WHERE scorer_id = @scorer_id AND feedback_id = @feedback_id AND status = 'pending'
  AND (scored_at IS NULL OR scored_at < greatest(now() - interval '10 minutes', @taken_over_before::timestamptz));

-- name: LiveScoreUpdate :exec
UPDATE live_scores SET status = @status, score = sqlc.narg('score'), safety_flag = @safety_flag, reason = @reason, calls = @calls,
    cost_micros = @cost_micros, scored_at = now()
WHERE scorer_id = @scorer_id AND feedback_id = @feedback_id AND status = 'pending';

-- name: LiveScoreUpdateSkipped :execrows
-- What is left to score is skipped, with the reason (the budget is spent).
UPDATE live_scores SET status = 'skipped', reason = @reason, scored_at = now()
WHERE scorer_id = @scorer_id AND status = 'pending';

-- name: LiveScorerListWithPending :many
-- Scorers with answers sampled over a minute ago and still not scored: a
-- scoring job that ended as they were sampled left them.
SELECT DISTINCT scorer_id FROM live_scores WHERE status = 'pending' AND created_at < now() - interval '1 minute';

-- name: LiveScoreUpdateRelease :exec
-- Gives back a claim whose scoring failed, for the retry.
UPDATE live_scores SET scored_at = NULL WHERE scorer_id = @scorer_id AND feedback_id = @feedback_id AND status = 'pending';
