-- +goose Up
-- Fine-tuning prices per organisation. A row is never changed: a new price
-- supersedes the old row and is inserted beside it, so the row a job's
-- estimate used (fine_tuning_jobs.price_id) still says what it said.
-- Money is in millionths of a US dollar per million trained tokens. An
-- organisation's first read copies the compiled defaults in.
CREATE TABLE fine_tuning_prices (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    provider         text NOT NULL,
    base_model       text NOT NULL,
    per_million      bigint NOT NULL CHECK (per_million >= 0),
    -- The day the price was read from the provider's pricing page.
    effective_date   date NOT NULL,
    created_by_label text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    superseded_at    timestamptz
);
CREATE UNIQUE INDEX fine_tuning_prices_current_idx ON fine_tuning_prices (org_id, provider, base_model)
    WHERE superseded_at IS NULL;

ALTER TABLE fine_tuning_jobs ADD COLUMN price_id uuid REFERENCES fine_tuning_prices (id) ON DELETE SET NULL;

-- A job's training files are no longer kept on the disk of the machine
-- that prepared them: each step that needs them writes them again from the
-- frozen version, and the digests taken when the job was prepared prove
-- that the upload sends those same bytes. A job prepared before this
-- change but not uploaded yet is prepared again.
ALTER TABLE fine_tuning_jobs DROP COLUMN train_path, DROP COLUMN valid_path;
ALTER TABLE fine_tuning_jobs ADD COLUMN train_sha256 text NOT NULL DEFAULT '',
                             ADD COLUMN valid_sha256 text NOT NULL DEFAULT '';

-- The local trainer's metrics.jsonl, line by line, as the worker that
-- polls the trainer reads it; seq is the line's byte offset in the file,
-- so reading a line again stores nothing new.
CREATE TABLE fine_tuning_run_metrics (
    job_id uuid NOT NULL REFERENCES fine_tuning_jobs (id) ON DELETE CASCADE,
    org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    seq    bigint NOT NULL,
    record json NOT NULL,
    PRIMARY KEY (job_id, seq)
);

-- +goose Down
DROP TABLE fine_tuning_run_metrics;
ALTER TABLE fine_tuning_jobs DROP COLUMN train_sha256, DROP COLUMN valid_sha256;
ALTER TABLE fine_tuning_jobs ADD COLUMN train_path text NOT NULL DEFAULT '',
                             ADD COLUMN valid_path text NOT NULL DEFAULT '';
ALTER TABLE fine_tuning_jobs DROP COLUMN price_id;
DROP TABLE fine_tuning_prices;
