-- +goose Up
-- The model registry (the seed's model_registry): registered models, their
-- versions, the aliases that point at one version each, the serving
-- targets versions are deployed to, the deployments (River jobs) that load
-- a version and move an alias, and the history of every move, which the
-- database refuses to change.

CREATE TYPE model_version_status AS ENUM ('testing', 'deployed', 'deprecated', 'archived');

-- A registered model is a name the assistant asks for ("support"); its
-- versions are what answers under that name over time.
CREATE TABLE registered_models (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    description text NOT NULL DEFAULT '',
    tags        text[] NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name),
    UNIQUE (org_id, id)
);

CREATE TABLE model_versions (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id              uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    registered_model_id uuid NOT NULL,
    -- Semantic version, unique within its registered model.
    version             text NOT NULL CHECK (version ~ '^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$'),
    -- "full": a whole model the provider serves; "lora": an adapter loaded
    -- on top of base_model by a serving target.
    kind                text NOT NULL CHECK (kind IN ('full', 'lora')),
    -- The provider's model id, or the adapter's location for a LoRA.
    model_id            text NOT NULL CHECK (model_id <> ''),
    base_model          text NOT NULL DEFAULT '',
    status              model_version_status NOT NULL DEFAULT 'testing',
    -- Where it came from: a fine-tuning job of ours (with the data it was
    -- trained on, by content hash), or registered by hand.
    fine_tuning_job_id  uuid UNIQUE REFERENCES fine_tuning_jobs (id) ON DELETE SET NULL,
    dataset_version_id  uuid REFERENCES dataset_versions (id) ON DELETE SET NULL,
    dataset_hash        text NOT NULL DEFAULT '',
    -- The training summary, copied at registration so it outlives the job.
    train_loss          double precision,
    valid_loss          double precision,
    trained_tokens      bigint NOT NULL DEFAULT 0,
    cost_micros         bigint,
    performance_metrics jsonb NOT NULL DEFAULT '{}',
    deployment_config   jsonb NOT NULL DEFAULT '{}',
    created_by_label    text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    deployed_at         timestamptz,
    UNIQUE (registered_model_id, version),
    UNIQUE (org_id, id),
    FOREIGN KEY (org_id, registered_model_id) REFERENCES registered_models (org_id, id) ON DELETE CASCADE
);
CREATE INDEX model_versions_model ON model_versions (org_id, registered_model_id, created_at DESC, id DESC);
CREATE INDEX model_versions_dataset_version ON model_versions (dataset_version_id) WHERE dataset_version_id IS NOT NULL;

-- An alias names one version of a registered model ("production",
-- "candidate", or any name a user gives).
CREATE TABLE model_aliases (
    org_id              uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    registered_model_id uuid NOT NULL,
    alias               text NOT NULL CHECK (alias ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    version_id          uuid NOT NULL,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (registered_model_id, alias),
    FOREIGN KEY (org_id, registered_model_id) REFERENCES registered_models (org_id, id) ON DELETE CASCADE,
    FOREIGN KEY (org_id, version_id) REFERENCES model_versions (org_id, id) ON DELETE CASCADE
);

-- Where versions are served. The API key, when there is one, is sealed
-- with the organisation's secret key and never read back to a user.
CREATE TABLE serving_targets (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id             uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name               text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    kind               text NOT NULL CHECK (kind IN ('vllm', 'openai', 'webhook')),
    base_url           text NOT NULL DEFAULT '',
    api_key_ciphertext bytea,
    api_key_nonce      bytea,
    -- Seconds an old adapter stays loaded after an alias moves away from it.
    unload_grace_s     integer NOT NULL DEFAULT 300 CHECK (unload_grace_s BETWEEN 0 AND 86400),
    created_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name),
    UNIQUE (org_id, id),
    CHECK ((api_key_ciphertext IS NULL) = (api_key_nonce IS NULL))
);

CREATE TYPE deployment_status AS ENUM ('queued', 'running', 'succeeded', 'failed');

-- A deployment puts one version under one alias on one target. The worker
-- stores each step's result before the next (loaded, verified, alias
-- moved), so a retried job resumes without loading twice.
CREATE TABLE deployments (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id              uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    registered_model_id uuid NOT NULL,
    version_id          uuid NOT NULL,
    target_id           uuid,
    alias               text NOT NULL,
    action              text NOT NULL CHECK (action IN ('deploy', 'rollback')),
    status              deployment_status NOT NULL DEFAULT 'queued',
    reason              text NOT NULL DEFAULT '',
    -- The version the alias pointed at when the deployment was asked for.
    previous_version_id uuid,
    -- The name the version is served under (the LoRA name on vLLM): unique
    -- per deployment, never reused.
    served_name         text NOT NULL DEFAULT '',
    loaded_at           timestamptz,
    verified_at         timestamptz,
    alias_moved_at      timestamptz,
    error               text NOT NULL DEFAULT '',
    river_job_id        bigint,
    created_by          uuid REFERENCES users (id) ON DELETE SET NULL,
    created_by_label    text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    FOREIGN KEY (org_id, registered_model_id) REFERENCES registered_models (org_id, id) ON DELETE CASCADE,
    FOREIGN KEY (org_id, version_id) REFERENCES model_versions (org_id, id) ON DELETE CASCADE,
    FOREIGN KEY (org_id, target_id) REFERENCES serving_targets (org_id, id)
);
-- One deployment at a time per alias: a second one asked for while the
-- first is under way is refused (409), not queued behind it.
CREATE UNIQUE INDEX deployments_one_active_per_alias ON deployments (registered_model_id, alias)
    WHERE status IN ('queued', 'running');
CREATE INDEX deployments_version ON deployments (org_id, version_id, created_at DESC);

-- Every alias move and every load or unload on a target, newest last.
-- Append-only: the trigger below refuses updates and deletes, so what was
-- in production when stays as it happened.
CREATE TABLE model_history (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id              uuid NOT NULL,
    registered_model_id uuid NOT NULL,
    at                  timestamptz NOT NULL DEFAULT now(),
    actor_label         text NOT NULL,
    action              text NOT NULL CHECK (action IN ('registered', 'alias_moved', 'loaded', 'unloaded', 'status_changed', 'deployment_failed')),
    alias               text NOT NULL DEFAULT '',
    from_version        text NOT NULL DEFAULT '',
    to_version          text NOT NULL DEFAULT '',
    target              text NOT NULL DEFAULT '',
    reason              text NOT NULL DEFAULT '',
    -- What the target answered, in words.
    result              text NOT NULL DEFAULT '',
    deployment_id       uuid
);
CREATE INDEX model_history_model ON model_history (org_id, registered_model_id, id DESC);

-- The registered model a fine-tuning job's result joins, chosen at launch;
-- empty: the dataset's name.
ALTER TABLE fine_tuning_jobs ADD COLUMN registered_model text NOT NULL DEFAULT '';

-- Where a feedback item or pair went: the dataset versions holding it.
CREATE INDEX dataset_version_items_source_idx ON dataset_version_items (source_id);

-- +goose StatementBegin
CREATE FUNCTION model_history_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'model_history is append-only: % refused', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER model_history_no_update BEFORE UPDATE OR DELETE ON model_history
    FOR EACH ROW EXECUTE FUNCTION model_history_append_only();
CREATE TRIGGER model_history_no_truncate BEFORE TRUNCATE ON model_history
    FOR EACH STATEMENT EXECUTE FUNCTION model_history_append_only();

-- +goose Down
ALTER TABLE fine_tuning_jobs DROP COLUMN registered_model;
DROP INDEX dataset_version_items_source_idx;
DROP TABLE model_history;
DROP FUNCTION model_history_append_only();
DROP TABLE deployments;
DROP TYPE deployment_status;
DROP TABLE serving_targets;
DROP TABLE model_aliases;
DROP TABLE model_versions;
DROP TABLE registered_models;
DROP TYPE model_version_status;
