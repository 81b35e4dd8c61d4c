-- Shadow deployments: the shadows of candidate versions, the queries they
-- mirror and both answers' scores.

-- name: ShadowInsert :one
-- A new shadow samples the feedback that arrives from now on.
INSERT INTO shadows (org_id, registered_model_id, alias, candidate_version_id, target, sample, config, formula, until, cursor_at, created_by_label)
VALUES (@org_id, @registered_model_id, @alias, @candidate_version_id, @target, @sample, @config, @formula, sqlc.narg('until'), now(), @created_by_label)
RETURNING *;

-- name: ShadowList :many
-- The organisation's shadows, newest first (of one candidate when
-- candidate_version_id is set), with their model's and candidate's names
-- and what their queries came to.
SELECT s.*, m.name AS model_name, v.version AS candidate_version,
       coalesce(c.scored, 0)::bigint AS scored, coalesce(c.open, 0)::bigint AS open,
       coalesce(c.skipped, 0)::bigint AS skipped, coalesce(c.failed, 0)::bigint AS failed,
       coalesce(c.cost_micros, 0)::bigint AS cost_micros
FROM shadows s
JOIN registered_models m ON m.id = s.registered_model_id
JOIN model_versions v ON v.id = s.candidate_version_id
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE status = 'scored') AS scored, count(*) FILTER (WHERE status IN ('pending', 'answered')) AS open,
           count(*) FILTER (WHERE status = 'skipped') AS skipped, count(*) FILTER (WHERE status = 'failed') AS failed,
           sum(judge_cost_micros) AS cost_micros
    FROM shadow_queries q WHERE q.shadow_id = s.id
) c ON true
WHERE s.org_id = @org_id
  AND (sqlc.narg('candidate_version_id')::uuid IS NULL OR s.candidate_version_id = sqlc.narg('candidate_version_id')::uuid)
  AND (sqlc.narg('id')::uuid IS NULL OR s.id = sqlc.narg('id')::uuid)
ORDER BY s.created_at DESC, s.id
LIMIT @row_limit;

-- name: ShadowGetForRun :one
-- A shadow, for its own jobs.
SELECT * FROM shadows WHERE id = @id;

-- name: ShadowListRunning :many
-- Every organisation's running shadows, for the periodic sampling.
SELECT * FROM shadows WHERE status = 'running' ORDER BY created_at;

-- name: ShadowUpdateCursor :exec
UPDATE shadows SET cursor_at = @cursor_at, cursor_id = @cursor_id WHERE id = @id;

-- name: ShadowUpdateCallCursor :exec
UPDATE shadows SET call_cursor_at = @cursor_at, call_cursor_id = @cursor_id WHERE id = @id;

-- name: ShadowFeedbackList :many
-- Feedback that names one of the models after the cursor and before
-- until, oldest first; feedback on a best-of-N call that recorded its
-- version is left to the call, which is sampled on its own.
SELECT f.id, f.created_at FROM feedback f
WHERE f.org_id = @org_id AND f.model = ANY(@models::text[]) AND f.created_at < @until
  AND (f.created_at, f.id) > (@cursor_at::timestamptz, @cursor_id::uuid)
  AND NOT EXISTS (
      SELECT 1 FROM best_of_n_responses r
      WHERE r.org_id = f.org_id AND r.model_version_id IS NOT NULL
        AND r.id = trace_selection_id(f.trace_id))
ORDER BY f.created_at, f.id LIMIT @row_limit;

-- name: ShadowSelectionList :many
-- Best-of-N calls that sampled their candidates from the version, after
-- the cursor and before until, oldest first.
SELECT id, created_at FROM best_of_n_responses
WHERE org_id = @org_id AND model_version_id = @version_id AND created_at < @until
  AND (created_at, id) > (@cursor_at::timestamptz, @cursor_id::uuid)
ORDER BY created_at, id LIMIT @row_limit;

-- name: ShadowUpdateStop :execrows
-- Stops a running shadow, with the reason: it samples nothing more, and
-- what it sampled is still answered and scored.
UPDATE shadows SET status = 'stopped', stopped_reason = @reason, stopped_at = now()
WHERE org_id = @org_id AND id = @id AND status = 'running';

-- name: ShadowQueryInsertPending :execrows
INSERT INTO shadow_queries (shadow_id, feedback_id, org_id, production_version_id)
SELECT @shadow_id, unnest(@feedback_ids::uuid[]), @org_id, @production_version_id
ON CONFLICT DO NOTHING;

-- name: ShadowQueryInsertPendingCalls :execrows
INSERT INTO shadow_queries (shadow_id, selection_id, org_id, production_version_id)
SELECT @shadow_id, unnest(@selection_ids::uuid[]), @org_id, @production_version_id
ON CONFLICT DO NOTHING;

-- name: ShadowQueryListOpen :many
-- Sampled queries still to answer or score and not claimed by a worker at
-- work (a claim older than ten minutes is a worker that died), oldest
-- first, with what the candidate and the scorers read: the query,
-- production's answer (a best-of-N call's selected candidate), the
-- reference, and the context (of the best-of-N call the feedback names by
-- trace_id, when the feedback has none of its own).
SELECT q.id, q.status, q.candidate_answer,
       coalesce(f.query, c.query, '')::text AS query,
       coalesce(f.response, c.candidates -> c.selected ->> 'text', '')::text AS response,
       coalesce(f.correction, '')::text AS correction,
       (CASE WHEN c.id IS NOT NULL THEN c.context WHEN f.context = '{}'::jsonb THEN coalesce(b.context, f.context) ELSE f.context END)::jsonb AS context
FROM shadow_queries q
LEFT JOIN feedback f ON f.id = q.feedback_id
LEFT JOIN best_of_n_responses c ON c.id = q.selection_id
LEFT JOIN LATERAL (
    SELECT r.context FROM best_of_n_responses r
    WHERE r.org_id = f.org_id
      AND r.id = trace_selection_id(f.trace_id)
) b ON true
WHERE q.shadow_id = @shadow_id AND q.status IN ('pending', 'answered')
  AND (q.claimed_at IS NULL OR q.claimed_at < now() - interval '10 minutes')
ORDER BY q.created_at, q.id LIMIT @row_limit;

-- name: ShadowQueryUpdateClaim :many
-- Claims an open query, in one statement: of workers that race for it,
-- one claims it and the others find no row. It answers what was already
-- begun: a set asked_at or scoring_at is a call a stopped worker made and
-- never recorded the answer of.
UPDATE shadow_queries SET claimed_at = now()
WHERE id = @id AND status IN ('pending', 'answered')
  AND (claimed_at IS NULL OR claimed_at < now() - interval '10 minutes')
RETURNING status, asked_at, scoring_at;

-- name: ShadowQueryUpdateAsked :exec
-- Recorded before the candidate is asked.
UPDATE shadow_queries SET asked_at = now() WHERE id = @id AND status = 'pending';

-- name: ShadowQueryUpdateAnswered :exec
UPDATE shadow_queries SET status = 'answered', candidate_answer = @candidate_answer, candidate_latency_ms = @candidate_latency_ms,
    prompt_tokens = @prompt_tokens, completion_tokens = @completion_tokens
WHERE id = @id AND status = 'pending';

-- name: ShadowQueryUpdateScoring :exec
-- Recorded before the scorers are asked.
UPDATE shadow_queries SET scoring_at = now() WHERE id = @id AND status = 'answered';

-- name: ShadowQueryUpdateScored :exec
UPDATE shadow_queries SET status = 'scored', scored_at = now(),
    production_scores = @production_scores, production_reward = sqlc.narg('production_reward'), production_invalid = @production_invalid,
    production_critique = @production_critique, production_safety = @production_safety,
    candidate_scores = @candidate_scores, candidate_reward = sqlc.narg('candidate_reward'), candidate_invalid = @candidate_invalid,
    candidate_critique = @candidate_critique, candidate_safety = @candidate_safety,
    judge_calls = @judge_calls, judge_cost_micros = @judge_cost_micros
WHERE id = @id AND status = 'answered';

-- name: ShadowQueryUpdateFailed :exec
UPDATE shadow_queries SET status = 'failed', reason = @reason, scored_at = now()
WHERE id = @id AND status IN ('pending', 'answered');

-- name: ShadowQueryUpdateRelease :exec
-- Gives back a claim, for the next run, when nothing was asked.
UPDATE shadow_queries SET claimed_at = NULL WHERE id = @id;

-- name: ShadowQueryUpdateSkipped :execrows
-- What is left open is skipped, with the reason (the budget is spent).
UPDATE shadow_queries SET status = 'skipped', reason = @reason, scored_at = now()
WHERE shadow_id = @shadow_id AND status IN ('pending', 'answered') AND (claimed_at IS NULL OR claimed_at < now() - interval '10 minutes');

-- name: ShadowQueryListScored :many
-- A shadow's scored queries, with both answers, oldest first; source_id
-- is the feedback's id, or the best-of-N call's.
SELECT coalesce(q.feedback_id, q.selection_id)::uuid AS source_id,
       coalesce(f.query, c.query, '')::text AS query,
       coalesce(f.response, c.candidates -> c.selected ->> 'text', '')::text AS response,
       coalesce(f.correction, '')::text AS correction, q.candidate_answer,
       q.production_scores, q.production_reward, q.production_invalid, q.production_critique, q.production_safety,
       q.candidate_scores, q.candidate_reward, q.candidate_invalid, q.candidate_critique, q.candidate_safety
FROM shadow_queries q
LEFT JOIN feedback f ON f.id = q.feedback_id
LEFT JOIN best_of_n_responses c ON c.id = q.selection_id
WHERE q.shadow_id = @shadow_id AND q.org_id = @org_id AND q.status = 'scored'
ORDER BY q.created_at, q.id LIMIT @row_limit;

-- name: ShadowListWithOpen :many
-- Shadows with queries sampled over a minute ago and still open: a run
-- that ended as they were sampled left them.
SELECT DISTINCT shadow_id FROM shadow_queries WHERE status IN ('pending', 'answered') AND created_at < now() - interval '1 minute';
