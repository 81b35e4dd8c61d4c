-- name: FineTuneJobInsert :one
INSERT INTO fine_tuning_jobs (
    org_id, dataset_version_id, dataset_label, dataset_kind, provider, base_model, method, export_format,
    hyperparameters, suffix, seed, train_examples, estimated_tokens, estimated_epochs, price_id, price_per_million,
    price_date, estimated_cost, created_by, created_by_label, local_settings, name, registered_model
) VALUES (
    @org_id, @dataset_version_id, @dataset_label, @dataset_kind, @provider, @base_model, @method, @export_format,
    @hyperparameters, @suffix, sqlc.narg('seed'), @train_examples, @estimated_tokens, @estimated_epochs, @price_id, @price_per_million,
    @price_date, @estimated_cost, @created_by, @created_by_label, @local_settings, @name, @registered_model
)
RETURNING *;

-- name: FineTuneJobCountByVersion :one
SELECT count(*) FROM fine_tuning_jobs WHERE org_id = @org_id AND dataset_version_id = @dataset_version_id;

-- name: FineTuneJobUpdateRiverID :exec
UPDATE fine_tuning_jobs SET river_job_id = @river_job_id WHERE id = @id;

-- name: FineTuneJobGet :one
SELECT * FROM fine_tuning_jobs WHERE org_id = @org_id AND id = @id;

-- name: FineTuneJobGetByID :one
SELECT * FROM fine_tuning_jobs WHERE id = @id;

-- name: FineTuneJobGetForUpdate :one
SELECT * FROM fine_tuning_jobs WHERE org_id = @org_id AND id = @id FOR UPDATE;

-- name: FineTuneJobList :many
SELECT j.* FROM fine_tuning_jobs j
WHERE j.org_id = @org_id
  AND (@status::text = '' OR j.status::text = @status)
  AND (@provider::text = '' OR j.provider = @provider)
  AND (@base_model::text = '' OR j.base_model = @base_model)
  AND (sqlc.narg('dataset_id')::uuid IS NULL OR EXISTS (
       SELECT 1 FROM dataset_versions v
       WHERE v.id = j.dataset_version_id AND v.org_id = j.org_id AND v.dataset_id = sqlc.narg('dataset_id')))
  AND (sqlc.narg('before_at')::timestamptz IS NULL OR (j.created_at, j.id) < (sqlc.narg('before_at')::timestamptz, @before_id::uuid))
ORDER BY j.created_at DESC, j.id DESC
LIMIT @row_limit;

-- name: FineTuneJobUpdatePrepared :exec
UPDATE fine_tuning_jobs
SET train_sha256 = @train_sha256, valid_sha256 = @valid_sha256, status = 'uploading',
    started_at = coalesce(started_at, now()), updated_at = now()
WHERE id = @id;

-- name: FineTuneJobUpdateFiles :exec
UPDATE fine_tuning_jobs
SET train_file_id = @train_file_id, valid_file_id = @valid_file_id, updated_at = now()
WHERE id = @id;

-- name: FineTuneJobUpdateFilesReady :exec
UPDATE fine_tuning_jobs SET files_ready = true, updated_at = now() WHERE id = @id;

-- name: FineTuneJobUpdateProviderJob :exec
UPDATE fine_tuning_jobs
SET provider_job_id = @provider_job_id, status = @status, provider_state = @provider_state, updated_at = now()
WHERE id = @id;

-- name: FineTuneJobUpdateWorker :exec
-- The worker starting a local job, with its runtime as its probe reported it.
UPDATE fine_tuning_jobs
SET worker_id = @worker_id, worker_runtime = @worker_runtime, updated_at = now()
WHERE id = @id;

-- name: FineTuneJobUpdateProgress :exec
UPDATE fine_tuning_jobs
SET status = @status, provider_state = @provider_state, event_cursor = @event_cursor,
    step = @step, total_steps = @total_steps, epoch = @epoch, total_epochs = @total_epochs,
    trained_tokens = @trained_tokens, fine_tuned_model = @fine_tuned_model, updated_at = now()
WHERE id = @id;

-- name: FineTuneJobUpdateFinished :exec
UPDATE fine_tuning_jobs
SET status = @status, provider_state = @provider_state, error_message = @error_message,
    trained_tokens = @trained_tokens, fine_tuned_model = @fine_tuned_model, actual_cost = @actual_cost,
    completed_at = now(), updated_at = now()
WHERE id = @id;

-- name: FineTuneJobUpdateCancelRequested :exec
UPDATE fine_tuning_jobs SET cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()
WHERE org_id = @org_id AND id = @id;

-- name: FineTuneJobUpdateCancelSent :exec
UPDATE fine_tuning_jobs SET cancel_sent_at = now(), updated_at = now() WHERE id = @id;

-- name: FineTuneEventInsert :exec
INSERT INTO fine_tuning_events (job_id, org_id, provider_event_id, at, level, message)
VALUES (@job_id, @org_id, @provider_event_id, @at, @level, @message)
ON CONFLICT (job_id, provider_event_id) DO NOTHING;

-- name: FineTuneEventList :many
SELECT * FROM fine_tuning_events WHERE org_id = @org_id AND job_id = @job_id ORDER BY at DESC, id DESC LIMIT @row_limit;

-- name: FineTuneMetricInsertOrUpdate :exec
INSERT INTO fine_tuning_metrics (job_id, org_id, step, epoch, train_loss, train_accuracy, valid_loss, valid_mean_token_accuracy)
VALUES (@job_id, @org_id, @step, @epoch, @train_loss, @train_accuracy, @valid_loss, @valid_mean_token_accuracy)
ON CONFLICT (job_id, step) DO UPDATE
SET epoch = CASE WHEN excluded.epoch > 0 THEN excluded.epoch ELSE fine_tuning_metrics.epoch END,
    train_loss = coalesce(excluded.train_loss, fine_tuning_metrics.train_loss),
    train_accuracy = coalesce(excluded.train_accuracy, fine_tuning_metrics.train_accuracy),
    valid_loss = coalesce(excluded.valid_loss, fine_tuning_metrics.valid_loss),
    valid_mean_token_accuracy = coalesce(excluded.valid_mean_token_accuracy, fine_tuning_metrics.valid_mean_token_accuracy);

-- name: FineTuneMetricList :many
SELECT * FROM fine_tuning_metrics WHERE org_id = @org_id AND job_id = @job_id ORDER BY step;

-- name: FineTuneRunMetricInsert :exec
INSERT INTO fine_tuning_run_metrics (job_id, org_id, seq, record)
VALUES (@job_id, @org_id, @seq, @record)
ON CONFLICT (job_id, seq) DO NOTHING;

-- name: FineTuneRunMetricList :many
-- The newest records of a run, newest first.
SELECT seq, record FROM fine_tuning_run_metrics
WHERE org_id = @org_id AND job_id = @job_id
ORDER BY seq DESC
LIMIT @row_limit;

-- name: FineTuneCheckpointInsertOrUpdate :exec
INSERT INTO fine_tuning_checkpoints (job_id, org_id, provider_checkpoint_id, step, model, at, metrics)
VALUES (@job_id, @org_id, @provider_checkpoint_id, @step, @model, @at, @metrics)
ON CONFLICT (job_id, provider_checkpoint_id) DO UPDATE SET step = excluded.step, model = excluded.model, metrics = excluded.metrics;

-- name: FineTuneCheckpointList :many
SELECT * FROM fine_tuning_checkpoints WHERE org_id = @org_id AND job_id = @job_id ORDER BY step;

-- name: FineTuneBudgetGet :one
SELECT * FROM fine_tuning_budgets WHERE org_id = @org_id;

-- name: FineTuneBudgetInsertDefault :exec
INSERT INTO fine_tuning_budgets (org_id, monthly) VALUES (@org_id, @monthly) ON CONFLICT (org_id) DO NOTHING;

-- name: FineTuneBudgetGetForUpdate :one
SELECT * FROM fine_tuning_budgets WHERE org_id = @org_id FOR UPDATE;

-- name: FineTuneBudgetUpdate :exec
INSERT INTO fine_tuning_budgets (org_id, monthly, updated_by_label) VALUES (@org_id, @monthly, @updated_by_label)
ON CONFLICT (org_id) DO UPDATE SET monthly = excluded.monthly, updated_by_label = excluded.updated_by_label, updated_at = now();

-- name: FineTuneJobGetSpent :one
-- What the month's jobs take from the budget: the actual cost of finished
-- jobs and the estimate of those still under way.
SELECT coalesce(sum(coalesce(actual_cost, CASE WHEN status IN ('failed', 'cancelled') THEN 0 ELSE estimated_cost END)), 0)::bigint
FROM fine_tuning_jobs
WHERE org_id = @org_id AND created_at >= @since;

-- name: FineTunePriceInsertDefaults :exec
-- Copies the compiled default prices in for an organisation that has never
-- had a price; two first reads at once insert them once.
INSERT INTO fine_tuning_prices (org_id, provider, base_model, per_million, effective_date, created_by_label)
SELECT @org_id, unnest(@providers::text[]), unnest(@base_models::text[]), unnest(@per_millions::bigint[]),
       @effective_date, 'Curate defaults'
WHERE NOT EXISTS (SELECT 1 FROM fine_tuning_prices p WHERE p.org_id = @org_id)
ON CONFLICT (org_id, provider, base_model) WHERE superseded_at IS NULL DO NOTHING;

-- name: FineTunePriceList :many
-- The organisation's prices in force.
SELECT * FROM fine_tuning_prices
WHERE org_id = @org_id AND superseded_at IS NULL
ORDER BY provider, base_model;

-- name: FineTunePriceInsert :one
INSERT INTO fine_tuning_prices (org_id, provider, base_model, per_million, effective_date, created_by_label)
VALUES (@org_id, @provider, @base_model, @per_million, @effective_date, @created_by_label)
RETURNING *;

-- name: FineTunePriceUpdateSuperseded :exec
UPDATE fine_tuning_prices SET superseded_at = now()
WHERE org_id = @org_id AND id = @id AND superseded_at IS NULL;

-- name: FineTuneRunKeyInsertOrUpdate :exec
-- The key a run holds for its reward API, replacing an earlier start's.
INSERT INTO fine_tuning_run_keys (job_id, org_id, api_key_id) VALUES (@job_id, @org_id, @api_key_id)
ON CONFLICT (job_id) DO UPDATE SET api_key_id = EXCLUDED.api_key_id, created_at = now();

-- name: APIKeyUpdateRevokedForRun :many
-- Revokes the key a run holds (when it has one still valid) and returns it.
UPDATE api_keys k SET revoked_at = now()
FROM fine_tuning_run_keys r
WHERE r.job_id = @job_id AND r.org_id = @org_id AND k.id = r.api_key_id AND k.org_id = @org_id AND k.revoked_at IS NULL
RETURNING k.id, k.name, k.prefix;
