-- +goose Up
-- The worker that started a local job, and what its trainer's probe said
-- of that machine then (device, whether Unsloth was installed): the job's
-- status reports the runtime it trains on, also after the worker has gone.
ALTER TABLE fine_tuning_jobs ADD COLUMN worker_id uuid;
ALTER TABLE fine_tuning_jobs ADD COLUMN worker_runtime jsonb NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE fine_tuning_jobs DROP COLUMN worker_runtime;
ALTER TABLE fine_tuning_jobs DROP COLUMN worker_id;
