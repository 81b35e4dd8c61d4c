-- Endpoints, the judge's templates, cache, calls and budget, agreement
-- runs with their conflicts, and best-of-N answers.

-- name: EndpointInsert :one
INSERT INTO endpoints (org_id, name, base_url, model, api_key_ciphertext, api_key_nonce, price_per_million_input,
    price_per_million_output, temperature, max_tokens, concurrency, created_by_label)
VALUES (@org_id, @name, @base_url, @model, @api_key_ciphertext, @api_key_nonce, @price_per_million_input,
    @price_per_million_output, @temperature, @max_tokens, @concurrency, @created_by_label)
RETURNING *;

-- name: EndpointList :many
SELECT * FROM endpoints WHERE org_id = @org_id ORDER BY name;

-- name: EndpointGetByName :one
SELECT * FROM endpoints WHERE org_id = @org_id AND name = @name;

-- name: JudgeTemplateInsert :one
INSERT INTO judge_templates (org_id, name, version, body, created_by_label)
SELECT @org_id, @name, coalesce(max(version), CASE WHEN @name::text = 'default' THEN 1 ELSE 0 END) + 1, @body, @created_by_label
FROM judge_templates WHERE org_id = @org_id AND name = @name
RETURNING *;

-- name: JudgeTemplateGetLatest :one
SELECT * FROM judge_templates WHERE org_id = @org_id AND name = @name ORDER BY version DESC LIMIT 1;

-- name: JudgeTemplateList :many
SELECT * FROM judge_templates WHERE org_id = @org_id ORDER BY name, version DESC;

-- name: JudgeCacheGet :one
SELECT * FROM judge_cache WHERE org_id = @org_id AND key = @key;

-- name: JudgeCacheInsert :exec
INSERT INTO judge_cache (org_id, key, score, safety_flag, critique, invalid_reason)
VALUES (@org_id, @key, sqlc.narg('score'), @safety_flag, @critique, @invalid_reason)
ON CONFLICT (org_id, key) DO NOTHING;

-- name: JudgeCallInsert :exec
INSERT INTO judge_calls (org_id, endpoint, model, template, template_version, purpose, prompt_tokens,
    completion_tokens, cost_micros, latency_ms, outcome)
VALUES (@org_id, @endpoint, @model, @template, @template_version, @purpose, @prompt_tokens,
    @completion_tokens, @cost_micros, @latency_ms, @outcome);

-- name: JudgeCallGetSpent :one
SELECT coalesce(sum(cost_micros), 0)::bigint AS spent, count(*)::bigint AS calls
FROM judge_calls WHERE org_id = @org_id AND created_at >= @since;

-- name: JudgeBudgetGet :one
SELECT * FROM judge_budgets WHERE org_id = @org_id;

-- name: JudgeBudgetUpdate :exec
INSERT INTO judge_budgets (org_id, monthly_micros, updated_by_label) VALUES (@org_id, @monthly_micros, @updated_by_label)
ON CONFLICT (org_id) DO UPDATE SET monthly_micros = excluded.monthly_micros, updated_by_label = excluded.updated_by_label, updated_at = now();

-- name: BestOfNResponseInsert :one
INSERT INTO best_of_n_responses (org_id, query, context, scorer, selection, generation_method, candidates, selected,
    reward_score, created_by_label)
VALUES (@org_id, @query, @context, @scorer, @selection, @generation_method, @candidates, @selected,
    @reward_score, @created_by_label)
RETURNING *;

-- name: BestOfNResponseGet :one
SELECT * FROM best_of_n_responses WHERE org_id = @org_id AND id = @id;

-- name: FeedbackListIDsByTraceID :many
-- Feedback on a logged best-of-N answer: its trace_id is the response id.
SELECT id FROM feedback WHERE org_id = @org_id AND trace_id = @trace_id ORDER BY created_at LIMIT 100;
