-- Evaluation: golden sets (internal/eval).

-- name: GoldenSetInsertOrUpdate :one
INSERT INTO golden_sets (version_id, org_id, name, split_tags, created_by_label)
VALUES (@version_id, @org_id, @name, @split_tags, @created_by_label)
ON CONFLICT (version_id) DO UPDATE SET name = EXCLUDED.name, split_tags = EXCLUDED.split_tags
RETURNING *;

-- name: GoldenSetDelete :execrows
DELETE FROM golden_sets WHERE org_id = @org_id AND version_id = @version_id;

-- name: GoldenSetList :many
SELECT sqlc.embed(g), dv.number AS version_number, dv.item_count, dv.kind, d.id AS dataset_id, d.name AS dataset_name
FROM golden_sets g
JOIN dataset_versions dv ON dv.id = g.version_id
JOIN training_datasets d ON d.id = dv.dataset_id
WHERE g.org_id = @org_id
  AND (sqlc.narg('version_id')::uuid IS NULL OR g.version_id = sqlc.narg('version_id'))
ORDER BY g.created_at DESC;

-- name: GoldenSetGet :one
SELECT * FROM golden_sets WHERE org_id = @org_id AND version_id = @version_id;

-- name: GoldenSetListItems :many
-- A frozen version's items with the tags of what each came from, for
-- splits by tag: feedback's tags, or a pair's.
SELECT i.source_id, i.split, i.content, coalesce(f.tags, p.tags, '{}')::text[] AS tags,
       coalesce(f.context->'documents', p.context_documents, '[]')::jsonb AS documents
FROM dataset_version_items i
JOIN dataset_versions dv ON dv.id = i.version_id AND dv.org_id = @org_id
LEFT JOIN feedback f ON f.id = i.source_id AND f.org_id = @org_id
LEFT JOIN preference_pairs p ON p.id = i.source_id AND p.org_id = @org_id
WHERE i.version_id = @version_id
ORDER BY i.content_sha, i.source_id;

-- name: EvaluationGateGet :one
SELECT g.*, s.name AS golden_set_name FROM evaluation_gates g JOIN golden_sets s ON s.version_id = g.golden_set_version_id
WHERE g.org_id = @org_id;

-- name: EvaluationGateInsertOrUpdate :exec
INSERT INTO evaluation_gates (org_id, golden_set_version_id, max_mean_drop, regression_margin, max_regressions, no_new_red_team_flags,
    leak_check, leak_min_words, updated_by_label)
VALUES (@org_id, @golden_set_version_id, @max_mean_drop, @regression_margin, @max_regressions, @no_new_red_team_flags,
    @leak_check, @leak_min_words, @updated_by_label)
ON CONFLICT (org_id) DO UPDATE SET golden_set_version_id = EXCLUDED.golden_set_version_id, max_mean_drop = EXCLUDED.max_mean_drop,
    regression_margin = EXCLUDED.regression_margin, max_regressions = EXCLUDED.max_regressions,
    no_new_red_team_flags = EXCLUDED.no_new_red_team_flags, leak_check = EXCLUDED.leak_check,
    leak_min_words = EXCLUDED.leak_min_words, updated_by_label = EXCLUDED.updated_by_label, updated_at = now();

-- name: EvaluationGateDelete :exec
DELETE FROM evaluation_gates WHERE org_id = @org_id;

-- name: EvaluationRunGetLatestFor :one
-- The newest finished evaluation of a version on a golden set.
SELECT * FROM evaluation_runs
WHERE org_id = @org_id AND candidate_version_id = @candidate_version_id AND golden_set_version_id = @golden_set_version_id
  AND status = 'succeeded' AND kind = 'quality'
ORDER BY finished_at DESC
LIMIT 1;

-- name: EvaluationRunGetLatestLeak :one
-- The newest finished leak check of a version, with its flagged answers.
SELECT r.*, (SELECT count(*) FROM evaluation_items i WHERE i.run_id = r.id AND i.safety_flag)::int AS leaked
FROM evaluation_runs r
WHERE r.org_id = @org_id AND r.candidate_version_id = @candidate_version_id AND r.status = 'succeeded' AND r.kind = 'leak'
  AND (r.config->'leak_check'->>'min_words')::int <= @max_min_words::int
ORDER BY r.finished_at DESC
LIMIT 1;

-- name: EvaluationItemListForComparison :many
-- Two runs' items side by side on the items both answered.
SELECT c.source_id, c.split, c.reward AS candidate_reward, b.reward AS baseline_reward,
       c.safety_flag AS candidate_flag, b.safety_flag AS baseline_flag,
       c.query, c.answer AS candidate_answer, b.answer AS baseline_answer
FROM evaluation_items c JOIN evaluation_items b ON b.source_id = c.source_id AND b.run_id = @baseline_run_id
WHERE c.run_id = @candidate_run_id
ORDER BY c.source_id;

-- name: EvaluationItemListPaired :many
-- Two runs' items side by side, with their scores and critiques, on the
-- items both runs hold.
SELECT a.source_id, a.split, a.query, a.reference,
       a.answer AS a_answer, a.reward AS a_reward, a.scores AS a_scores, a.critique AS a_critique,
       a.safety_flag AS a_flag, a.invalid_reason AS a_invalid,
       b.answer AS b_answer, b.reward AS b_reward, b.scores AS b_scores, b.critique AS b_critique,
       b.safety_flag AS b_flag, b.invalid_reason AS b_invalid
FROM evaluation_items a JOIN evaluation_items b ON b.source_id = a.source_id AND b.run_id = @b_run_id
WHERE a.run_id = @a_run_id
ORDER BY a.source_id;

-- name: GateOverrideInsert :one
INSERT INTO gate_overrides (org_id, version_id, reason, actor_label) VALUES (@org_id, @version_id, @reason, @actor_label)
RETURNING *;

-- name: GateOverrideList :many
SELECT * FROM gate_overrides WHERE org_id = @org_id AND version_id = @version_id ORDER BY id DESC;

-- name: EvaluationRunInsert :one
INSERT INTO evaluation_runs (org_id, kind, golden_set_version_id, candidate_version_id, candidate_endpoint, config, total, created_by_label)
VALUES (@org_id, @kind, @golden_set_version_id, @candidate_version_id, @candidate_endpoint, @config, @total, @created_by_label)
RETURNING *;

-- name: EvaluationRunUpdateRiverID :exec
UPDATE evaluation_runs SET river_job_id = @river_job_id WHERE id = @id;

-- name: EvaluationRunGet :one
SELECT * FROM evaluation_runs WHERE org_id = @org_id AND id = @id;

-- name: EvaluationRunGetByID :one
-- For the worker, which knows the run only by its id.
SELECT * FROM evaluation_runs WHERE id = @id;

-- name: EvaluationRunUpdateStatus :exec
UPDATE evaluation_runs SET status = @status, paused_reason = '' WHERE id = @id AND status NOT IN ('succeeded', 'failed');

-- name: EvaluationRunUpdateProgress :exec
UPDATE evaluation_runs
SET done = done + 1, invalid = invalid + CASE WHEN @invalid::bool THEN 1 ELSE 0 END,
    judge_calls = judge_calls + @judge_calls, judge_cost_micros = judge_cost_micros + @judge_cost_micros,
    answer_cost_micros = answer_cost_micros + @answer_cost_micros
WHERE id = @id;

-- name: EvaluationRunUpdatePaused :exec
UPDATE evaluation_runs SET status = 'paused', paused_reason = @paused_reason WHERE id = @id AND status NOT IN ('succeeded', 'failed');

-- name: EvaluationRunUpdateFinished :exec
UPDATE evaluation_runs SET status = 'succeeded', mean_reward = sqlc.narg('mean_reward'), ci_low = sqlc.narg('ci_low'),
    ci_high = sqlc.narg('ci_high'), finished_at = now()
WHERE id = @id;

-- name: EvaluationRunUpdateFailed :exec
UPDATE evaluation_runs SET status = 'failed', error = @error, finished_at = now()
WHERE id = @id AND status NOT IN ('succeeded', 'failed');

-- name: EvaluationItemInsert :execrows
INSERT INTO evaluation_items (run_id, source_id, split, query, reference, answer, scores, reward, reward_explanation,
    invalid_reason, critique, safety_flag, prompt_tokens, completion_tokens, answer_cost_micros, latency_ms)
VALUES (@run_id, @source_id, @split, @query, @reference, @answer, @scores, sqlc.narg('reward'), @reward_explanation,
    @invalid_reason, @critique, @safety_flag, @prompt_tokens, @completion_tokens, @answer_cost_micros, @latency_ms)
ON CONFLICT (run_id, source_id) DO NOTHING;

-- name: EvaluationRunList :many
SELECT r.*, coalesce(g.name, d.name || ' v' || dv.number)::text AS golden_set_name,
       coalesce(rm.name || ' ' || mv.version, '')::text AS candidate_version_label
FROM evaluation_runs r
JOIN dataset_versions dv ON dv.id = r.golden_set_version_id
JOIN training_datasets d ON d.id = dv.dataset_id
LEFT JOIN golden_sets g ON g.version_id = r.golden_set_version_id
LEFT JOIN model_versions mv ON mv.id = r.candidate_version_id
LEFT JOIN registered_models rm ON rm.id = mv.registered_model_id
WHERE r.org_id = @org_id AND (sqlc.narg('candidate_version_id')::uuid IS NULL OR r.candidate_version_id = sqlc.narg('candidate_version_id'))
ORDER BY r.created_at DESC
LIMIT 100;

-- name: EvaluationRunGetWithNames :one
SELECT r.*, coalesce(g.name, d.name || ' v' || dv.number)::text AS golden_set_name,
       coalesce(rm.name || ' ' || mv.version, '')::text AS candidate_version_label
FROM evaluation_runs r
JOIN dataset_versions dv ON dv.id = r.golden_set_version_id
JOIN training_datasets d ON d.id = dv.dataset_id
LEFT JOIN golden_sets g ON g.version_id = r.golden_set_version_id
LEFT JOIN model_versions mv ON mv.id = r.candidate_version_id
LEFT JOIN registered_models rm ON rm.id = mv.registered_model_id
WHERE r.org_id = @org_id AND r.id = @id;

-- name: EvaluationItemListIDs :many
SELECT source_id FROM evaluation_items WHERE run_id = @run_id;

-- name: EvaluationItemListRewards :many
SELECT reward::float8 FROM evaluation_items WHERE run_id = @run_id AND reward IS NOT NULL ORDER BY source_id;

-- name: EvaluationItemList :many
SELECT * FROM evaluation_items WHERE run_id = @run_id ORDER BY split, source_id;

-- name: EvaluationRunGetForUpdate :one
SELECT * FROM evaluation_runs WHERE org_id = @org_id AND id = @id FOR UPDATE;

-- name: EvaluationRunUpdateResumed :exec
-- A run not finished queued again, under the job that carries it on now.
UPDATE evaluation_runs SET status = 'queued', paused_reason = '', river_job_id = @river_job_id
WHERE org_id = @org_id AND id = @id AND status NOT IN ('succeeded', 'failed');

-- name: EvaluationItemListForSummary :many
-- What a finished run's summary is computed from, split by split.
SELECT split, reward, latency_ms, answer <> '' AS answered FROM evaluation_items WHERE run_id = @run_id ORDER BY split, source_id;
