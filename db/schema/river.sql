-- The columns of River's job table that Curate's own queries read. River
-- creates and migrates the real table (rivermigrate); this copy only lets sqlc
-- type-check those queries.
CREATE TYPE river_job_state AS ENUM ('available', 'cancelled', 'completed', 'discarded', 'pending', 'retryable', 'running', 'scheduled');

CREATE TABLE river_job (
    id bigint PRIMARY KEY,
    state river_job_state NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL,
    metadata jsonb NOT NULL,
    attempt smallint NOT NULL,
    max_attempts smallint NOT NULL,
    attempted_at timestamptz,
    scheduled_at timestamptz NOT NULL,
    errors jsonb[],
    created_at timestamptz NOT NULL,
    finalized_at timestamptz
);

CREATE TABLE river_migration (
    line text NOT NULL,
    version bigint NOT NULL,
    created_at timestamptz NOT NULL
);
