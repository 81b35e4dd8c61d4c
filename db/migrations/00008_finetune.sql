-- +goose Up
CREATE TYPE finetune_status AS ENUM ('pending', 'uploading', 'validating', 'queued', 'running', 'succeeded', 'failed', 'cancelled');

-- Fine-tuning jobs at a provider (the seed's fine_tuning_jobs). The worker
-- moves a job one step at a time and stores each step's result (prepared
-- files, uploaded file ids, the provider's job id) before the next, so a
-- retried worker resumes instead of paying twice. Money is kept in
-- millionths of a US dollar.
CREATE TABLE fine_tuning_jobs (
    id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id                 uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- The frozen dataset version trained on, and its name for display.
    dataset_version_id     uuid NOT NULL,
    dataset_label          text NOT NULL,
    dataset_kind           text NOT NULL CHECK (dataset_kind IN ('sft', 'preference')),
    provider               text NOT NULL,
    base_model             text NOT NULL,
    method                 text NOT NULL CHECK (method IN ('supervised', 'dpo')),
    export_format          text NOT NULL,
    hyperparameters        jsonb NOT NULL DEFAULT '{}',
    suffix                 text NOT NULL DEFAULT '',
    seed                   bigint,
    status                 finetune_status NOT NULL DEFAULT 'pending',
    provider_state         text NOT NULL DEFAULT '',
    -- Step results, in the order the worker takes them.
    train_path             text NOT NULL DEFAULT '',
    valid_path             text NOT NULL DEFAULT '',
    train_file_id          text NOT NULL DEFAULT '',
    valid_file_id          text NOT NULL DEFAULT '',
    files_ready            boolean NOT NULL DEFAULT false,
    provider_job_id        text NOT NULL DEFAULT '',
    event_cursor           text NOT NULL DEFAULT '',
    cancel_requested_at    timestamptz,
    cancel_sent_at         timestamptz,
    -- Progress as the provider last reported it.
    step                   integer NOT NULL DEFAULT 0,
    total_steps            integer NOT NULL DEFAULT 0,
    epoch                  integer NOT NULL DEFAULT 0,
    total_epochs           integer NOT NULL DEFAULT 0,
    -- Cost: the estimate made at launch with the price of that day, and
    -- what the provider's trained tokens came to.
    train_examples         integer NOT NULL,
    estimated_tokens       bigint NOT NULL,
    estimated_epochs       integer NOT NULL,
    price_per_million      bigint NOT NULL,
    price_date             text NOT NULL,
    estimated_cost         bigint NOT NULL,
    trained_tokens         bigint NOT NULL DEFAULT 0,
    actual_cost            bigint,
    fine_tuned_model       text NOT NULL DEFAULT '',
    error_message          text NOT NULL DEFAULT '',
    river_job_id           bigint,
    created_by             uuid REFERENCES users (id) ON DELETE SET NULL,
    created_by_label       text NOT NULL DEFAULT '',
    created_at             timestamptz NOT NULL DEFAULT now(),
    started_at             timestamptz,
    completed_at           timestamptz,
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fine_tuning_jobs_org_created_idx ON fine_tuning_jobs (org_id, created_at DESC, id DESC);

-- The provider's job log, one row per event.
CREATE TABLE fine_tuning_events (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id            uuid NOT NULL REFERENCES fine_tuning_jobs (id) ON DELETE CASCADE,
    org_id            uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    provider_event_id text NOT NULL,
    at                timestamptz NOT NULL,
    level             text NOT NULL,
    message           text NOT NULL,
    UNIQUE (job_id, provider_event_id)
);

-- Training metrics per step; a later report of a step replaces the earlier.
CREATE TABLE fine_tuning_metrics (
    job_id                    uuid NOT NULL REFERENCES fine_tuning_jobs (id) ON DELETE CASCADE,
    org_id                    uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    step                      integer NOT NULL,
    epoch                     integer NOT NULL DEFAULT 0,
    train_loss                double precision,
    train_accuracy            double precision,
    valid_loss                double precision,
    valid_mean_token_accuracy double precision,
    PRIMARY KEY (job_id, step)
);

-- Usable intermediate models with their metrics.
CREATE TABLE fine_tuning_checkpoints (
    job_id                 uuid NOT NULL REFERENCES fine_tuning_jobs (id) ON DELETE CASCADE,
    org_id                 uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    provider_checkpoint_id text NOT NULL,
    step                   integer NOT NULL,
    model                  text NOT NULL,
    at                     timestamptz NOT NULL,
    metrics                jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (job_id, provider_checkpoint_id)
);

-- Each organisation's monthly fine-tuning budget; without a row the
-- configured default applies.
CREATE TABLE fine_tuning_budgets (
    org_id           uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    monthly          bigint NOT NULL CHECK (monthly >= 0),
    updated_by_label text NOT NULL DEFAULT '',
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE fine_tuning_budgets;
DROP TABLE fine_tuning_checkpoints;
DROP TABLE fine_tuning_metrics;
DROP TABLE fine_tuning_events;
DROP TABLE fine_tuning_jobs;
DROP TYPE finetune_status;
