-- +goose Up
-- One import of a feedback file, from the upload (or the CLI) to its outcome.
-- The file is read twice, first to check every line, then to store, so
-- progress is the phase and the bytes read in it.
CREATE TABLE import_runs (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kind             text NOT NULL CHECK (kind IN ('jsonl', 'oasst')),
    file_name        text NOT NULL CHECK (length(file_name) BETWEEN 1 AND 255),
    file_size        bigint NOT NULL CHECK (file_size >= 0),
    status           text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    phase            text NOT NULL DEFAULT '' CHECK (phase IN ('', 'checking', 'storing')),
    bytes_done       bigint NOT NULL DEFAULT 0 CHECK (bytes_done >= 0),
    stored           integer NOT NULL DEFAULT 0,
    duplicates       integer NOT NULL DEFAULT 0,
    skipped          integer NOT NULL DEFAULT 0,
    -- Why records were skipped: reason -> count.
    skip_reasons     jsonb NOT NULL DEFAULT '{}',
    error            text NOT NULL DEFAULT '',
    error_line       integer,
    created_by       uuid REFERENCES users (id) ON DELETE SET NULL,
    created_by_label text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX import_runs_org_idx ON import_runs (org_id, created_at DESC, id DESC);

-- An organisation's Langfuse project, synced periodically. The secret key is
-- stored encrypted (AES-GCM, the organisation's id as associated data).
CREATE TABLE langfuse_connections (
    org_id              uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    host                text NOT NULL,
    public_key          text NOT NULL,
    secret_ciphertext   bytea NOT NULL,
    secret_nonce        bytea NOT NULL,
    -- Scores are listed from this timestamp on (inclusive): the newest score
    -- timestamp the last successful sync saw.
    sync_from           timestamptz,
    sync_started_at     timestamptz, -- set while a sync runs
    last_sync_at        timestamptz, -- the last successful sync
    last_attempt_at     timestamptz,
    last_stored         integer NOT NULL DEFAULT 0,
    last_duplicates     integer NOT NULL DEFAULT 0,
    last_skipped        integer NOT NULL DEFAULT 0,
    last_skip_reasons   jsonb NOT NULL DEFAULT '{}',
    total_stored        bigint NOT NULL DEFAULT 0,
    last_error          text NOT NULL DEFAULT '',
    updated_by          uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE langfuse_connections;
DROP TABLE import_runs;
