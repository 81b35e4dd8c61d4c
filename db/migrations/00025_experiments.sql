-- +goose Up
-- A/B experiments between model versions: arms with weights, deterministic
-- assignment of units (GrowthBook's version-2 hash of the seed and the unit
-- id), the first exposure of each unit, feedback attributed to its arm, and
-- a gradual rollout plan with automatic rollback.

CREATE TYPE experiment_status AS ENUM ('draft', 'running', 'paused', 'completed', 'cancelled');

CREATE TABLE experiments (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id              uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    key                 text NOT NULL CHECK (key ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    name                text NOT NULL,
    -- The registered model whose traffic it splits (the arms' versions').
    registered_model_id uuid NOT NULL REFERENCES registered_models (id) ON DELETE CASCADE,
    seed                text NOT NULL,
    -- The share of units in the experiment at all.
    coverage            double precision NOT NULL DEFAULT 1 CHECK (coverage > 0 AND coverage <= 1),
    status              experiment_status NOT NULL DEFAULT 'draft',
    -- The primary metric first.
    metrics             text[] NOT NULL DEFAULT '{}',
    guardrails          text[] NOT NULL DEFAULT '{}',
    min_sample_per_arm  integer NOT NULL DEFAULT 100 CHECK (min_sample_per_arm >= 2),
    winner              text NOT NULL DEFAULT '' CHECK (winner IN ('', 'control', 'treatment', 'inconclusive')),
    -- Units assigned an arm other than the one first recorded for them.
    conflicts           bigint NOT NULL DEFAULT 0,
    -- The rollout plan: treatment shares to step through ([0.1, 0.5, 1]),
    -- each held at least rollout_hold and rollout_min_units per arm; the
    -- step reached and when.
    rollout_steps       double precision[] NOT NULL DEFAULT '{}',
    rollout_hold        interval NOT NULL DEFAULT '1 day',
    rollout_min_units   integer NOT NULL DEFAULT 100,
    rollout_step        integer NOT NULL DEFAULT 0,
    rollout_step_at     timestamptz,
    stop_reason         text NOT NULL DEFAULT '',
    started_at          timestamptz,
    ends_at             timestamptz,
    ended_at            timestamptz,
    created_by_label    text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, key)
);

CREATE TABLE experiment_arms (
    experiment_id    uuid NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    idx              integer NOT NULL CHECK (idx >= 0),
    name             text NOT NULL,
    model_version_id uuid NOT NULL REFERENCES model_versions (id),
    weight           double precision NOT NULL CHECK (weight >= 0 AND weight <= 1),
    PRIMARY KEY (experiment_id, idx)
);

-- A unit's first exposure: the arm it was first assigned stays its arm for
-- analysis, whatever later weights say.
CREATE TABLE experiment_exposures (
    experiment_id uuid NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    unit_id       text NOT NULL,
    arm           integer NOT NULL,
    first_seen    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (experiment_id, unit_id)
);

-- Feedback sent with an experiment's key is attributed to the unit's arm.
ALTER TABLE feedback ADD COLUMN experiment_id uuid;
CREATE INDEX feedback_experiment ON feedback (experiment_id, end_user_id) WHERE experiment_id IS NOT NULL;

-- The registry's history also records an experiment's traffic moving to
-- or away from a version (a rollout step, an automatic rollback).
ALTER TABLE model_history DROP CONSTRAINT model_history_action_check;
ALTER TABLE model_history ADD CONSTRAINT model_history_action_check CHECK (action IN ('registered', 'alias_moved', 'loaded', 'unloaded',
    'status_changed', 'deployment_failed', 'traffic_shifted', 'traffic_rolled_back'));

-- +goose Down
ALTER TABLE model_history DROP CONSTRAINT model_history_action_check;
ALTER TABLE model_history ADD CONSTRAINT model_history_action_check CHECK (action IN ('registered', 'alias_moved', 'loaded', 'unloaded',
    'status_changed', 'deployment_failed')) NOT VALID;
DROP INDEX feedback_experiment;
ALTER TABLE feedback DROP COLUMN experiment_id;
DROP TABLE experiment_exposures;
DROP TABLE experiment_arms;
DROP TABLE experiments;
DROP TYPE experiment_status;
