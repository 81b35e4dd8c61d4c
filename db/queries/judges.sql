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

-- name: JudgeTemplateGetForUpdate :exec
-- Holds one template name of the organisation still until the transaction
-- ends, so that saves take turns numbering versions. An advisory lock,
-- since the name may have no row yet.
SELECT pg_advisory_xact_lock(3, hashtext(concat(@org_id::uuid, '/', @name::text)));

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

-- A best-of-N selection, logged with its candidates and scores.
-- name: SelectionInsert :one
INSERT INTO best_of_n_responses (org_id, query, context, scorer, selection, generation_method, candidates, selected,
    reward_score, created_by_label, model_version_id)
VALUES (@org_id, @query, @context, @scorer, @selection, @generation_method, @candidates, @selected,
    @reward_score, @created_by_label, sqlc.narg('model_version_id'))
RETURNING *;

-- name: SelectionGet :one
SELECT * FROM best_of_n_responses WHERE org_id = @org_id AND id = @id;

-- name: FeedbackListIDsByTraceID :many
-- Feedback on a logged best-of-N answer: its trace_id is the response id.
SELECT id FROM feedback WHERE org_id = @org_id AND trace_id = @trace_id ORDER BY created_at LIMIT 100;

-- name: JudgeAgreementInsert :one
INSERT INTO judge_agreements (org_id, endpoint, template, template_version, filter, threshold, item_limit, total, created_by_label)
VALUES (@org_id, @endpoint, @template, @template_version, @filter, @threshold, @item_limit, @total, @created_by_label)
RETURNING *;

-- name: JudgeAgreementUpdateRiverID :exec
UPDATE judge_agreements SET river_job_id = @river_job_id WHERE id = @id;

-- name: JudgeAgreementGet :one
SELECT * FROM judge_agreements WHERE org_id = @org_id AND id = @id;

-- name: JudgeAgreementGetByID :one
-- For the worker, which knows the run only by its id.
SELECT * FROM judge_agreements WHERE id = @id;

-- name: JudgeAgreementList :many
SELECT * FROM judge_agreements WHERE org_id = @org_id ORDER BY created_at DESC LIMIT 50;

-- name: JudgeAgreementUpdateRunning :exec
UPDATE judge_agreements SET status = 'running', paused_reason = '' WHERE id = @id AND status NOT IN ('succeeded', 'failed');

-- name: JudgeAgreementUpdateProgress :exec
UPDATE judge_agreements SET done = @done, invalid = @invalid, judge_calls = judge_calls + @judge_calls,
    judge_cost_micros = judge_cost_micros + @judge_cost_micros
WHERE id = @id;

-- name: JudgeAgreementUpdatePaused :exec
UPDATE judge_agreements SET status = 'paused', paused_reason = @paused_reason WHERE id = @id AND status NOT IN ('succeeded', 'failed');

-- name: JudgeAgreementUpdateFinished :exec
UPDATE judge_agreements SET status = 'succeeded', done = @done, invalid = @invalid, spearman = sqlc.narg('spearman'),
    kappa = sqlc.narg('kappa'), agreement = sqlc.narg('agreement'), conflicts = @conflicts, finished_at = now()
WHERE id = @id;

-- name: JudgeAgreementUpdateFailed :exec
UPDATE judge_agreements SET status = 'failed', error = @error, finished_at = now()
WHERE id = @id AND status NOT IN ('succeeded', 'failed');

-- name: JudgeConflictInsert :exec
INSERT INTO judge_conflicts (org_id, agreement_id, feedback_id, human_score, judge_score, judge_safety_flag, critique)
VALUES (@org_id, @agreement_id::uuid, @feedback_id::uuid, @human_score, @judge_score, @judge_safety_flag, @critique)
ON CONFLICT (agreement_id, feedback_id) DO NOTHING;

-- name: JudgeConflictList :many
-- The conflict queue: open conflicts first, newest first, with the item's
-- question and answer: a rated feedback item the judge disagreed with, or
-- a training run's sample whose teacher and rules disagreed (its job in
-- training_job_id, the rules' score as human_score). An item not found
-- (a read beside a partition move) shows empty rather than failing the page.
SELECT c.*, left(coalesce(f.query, s.prompt, ''), 300)::text AS query_preview,
       left(coalesce(f.response, s.completion, ''), 300)::text AS response_preview,
       f.feedback_type, f.rating, coalesce(a.endpoint, '')::text AS endpoint, coalesce(a.template, '')::text AS template,
       coalesce(a.template_version, 0)::int AS template_version, s.job_id AS training_job_id
FROM judge_conflicts c
LEFT JOIN feedback f ON f.id = c.feedback_id
LEFT JOIN judge_agreements a ON a.id = c.agreement_id
LEFT JOIN rlaif_samples s ON s.id = c.rlaif_sample_id
WHERE c.org_id = @org_id AND (@resolved::bool = (c.resolution IS NOT NULL))
ORDER BY c.created_at DESC, c.id
LIMIT 200;

-- name: JudgeConflictGet :one
SELECT * FROM judge_conflicts WHERE org_id = @org_id AND id = @id;

-- name: JudgeConflictCountOpen :one
SELECT count(*) FROM judge_conflicts WHERE org_id = @org_id AND resolution IS NULL;

-- name: JudgeConflictUpdateResolution :execrows
UPDATE judge_conflicts SET resolution = @resolution, note = @note, resolved_by_label = @resolved_by_label, resolved_at = now()
WHERE org_id = @org_id AND id = @id AND resolution IS NULL;

-- name: JudgeAgreementGetForUpdate :one
SELECT * FROM judge_agreements WHERE org_id = @org_id AND id = @id FOR UPDATE;

-- name: JudgeAgreementUpdateResumed :exec
-- A run not finished queued again, under the job that carries it on now.
UPDATE judge_agreements SET status = 'queued', paused_reason = '', river_job_id = @river_job_id
WHERE org_id = @org_id AND id = @id AND status NOT IN ('succeeded', 'failed');

-- name: JudgeSpendingInsertMonth :exec
-- The month's row of the budget, started at what the month's logged calls
-- cost; a row already there is left as it is.
INSERT INTO judge_spending (org_id, month, spent_micros)
VALUES (@org_id, @month, (
    SELECT coalesce(sum(c.cost_micros), 0)::bigint FROM judge_calls c
    WHERE c.org_id = @org_id AND c.created_at >= @month AND c.created_at < @month_end))
ON CONFLICT (org_id, month) DO NOTHING;

-- name: JudgeSpendingGet :one
SELECT * FROM judge_spending WHERE org_id = @org_id AND month = @month;

-- name: JudgeReservationInsert :one
-- Reserves a call's estimated cost in one statement. The update locks the
-- month's row, and Postgres reads its condition again on the row's newest
-- version once the lock is held, so of parallel callers only those that
-- find room left reserve: the last may overshoot by its own estimate, no
-- more. No row: no room left (or no month's row yet).
WITH granted AS (
    UPDATE judge_spending s SET reserved_micros = s.reserved_micros + @micros::bigint
    WHERE s.org_id = @org_id AND s.month = @month AND s.spent_micros + s.reserved_micros < @monthly_micros::bigint
    RETURNING s.org_id, s.month
)
INSERT INTO judge_reservations (org_id, month, micros, purpose, expires_at)
SELECT g.org_id, g.month, @micros::bigint, @purpose::text, now() + make_interval(secs => @ttl_seconds::float8) FROM granted g
RETURNING id;

-- name: JudgeReservationDeleteSettled :exec
-- A call's reservation gives way to what it cost, in the transaction that
-- logs the call. One that expired meanwhile was given back already; the
-- cost counts all the same.
WITH settled AS (DELETE FROM judge_reservations WHERE id = @id RETURNING micros)
UPDATE judge_spending s SET
    reserved_micros = s.reserved_micros - coalesce((SELECT sum(micros) FROM settled), 0)::bigint,
    spent_micros = s.spent_micros + @cost_micros::bigint
WHERE s.org_id = @org_id AND s.month = @month;

-- name: JudgeReservationDeleteExpired :execrows
-- Gives back what expired reservations hold: their process stopped
-- between reserving and settling, and nothing else will.
WITH gone AS (
    DELETE FROM judge_reservations WHERE org_id = @org_id AND expires_at < now() RETURNING month, micros
)
UPDATE judge_spending s SET reserved_micros = s.reserved_micros - g.micros
FROM (SELECT month, sum(micros)::bigint AS micros FROM gone GROUP BY month) g
WHERE s.org_id = @org_id AND s.month = g.month;
