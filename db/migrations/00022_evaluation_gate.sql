-- +goose Up
-- Evaluation runs and their items: a candidate's answers to a golden set's
-- prompts, each scored, and the aggregate. The promotion gate compares a
-- candidate's run with production's on the organisation's gate set.
CREATE TYPE evaluation_status AS ENUM ('queued', 'running', 'paused', 'succeeded', 'failed');

CREATE TABLE evaluation_runs (
    id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id                uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    golden_set_version_id uuid NOT NULL REFERENCES dataset_versions (id) ON DELETE CASCADE,
    -- What answered: a registered model version, or an endpoint by name.
    candidate_version_id  uuid REFERENCES model_versions (id) ON DELETE SET NULL,
    candidate_endpoint    text NOT NULL DEFAULT '',
    -- The judge, scorers and reward formula (with its version) the run used.
    config                jsonb NOT NULL DEFAULT '{}',
    status                evaluation_status NOT NULL DEFAULT 'queued',
    done                  integer NOT NULL DEFAULT 0,
    total                 integer NOT NULL DEFAULT 0,
    mean_reward           double precision,
    ci_low                double precision,
    ci_high               double precision,
    invalid               integer NOT NULL DEFAULT 0,
    judge_calls           integer NOT NULL DEFAULT 0,
    judge_cost_micros     bigint NOT NULL DEFAULT 0,
    paused_reason         text NOT NULL DEFAULT '',
    error                 text NOT NULL DEFAULT '',
    river_job_id          bigint,
    created_by_label      text NOT NULL DEFAULT '',
    created_at            timestamptz NOT NULL DEFAULT now(),
    finished_at           timestamptz
);
CREATE INDEX evaluation_runs_candidate ON evaluation_runs (org_id, candidate_version_id, golden_set_version_id, finished_at DESC);

CREATE TABLE evaluation_items (
    run_id         uuid NOT NULL REFERENCES evaluation_runs (id) ON DELETE CASCADE,
    source_id      uuid NOT NULL,
    split          text NOT NULL DEFAULT 'all',
    query          text NOT NULL DEFAULT '',
    reference      text NOT NULL DEFAULT '',
    answer         text NOT NULL DEFAULT '',
    scores         jsonb NOT NULL DEFAULT '{}',
    -- NULL with a reason when a score could not be had: never a number
    -- standing in for one.
    reward         double precision,
    invalid_reason text NOT NULL DEFAULT '',
    critique       text NOT NULL DEFAULT '',
    safety_flag    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (run_id, source_id)
);

-- The organisation's promotion gate: moving the production alias needs a
-- passing evaluation on this golden set. No row: no gate.
CREATE TABLE evaluation_gates (
    org_id                uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    golden_set_version_id uuid NOT NULL REFERENCES golden_sets (version_id) ON DELETE CASCADE,
    -- The candidate's mean reward may fall at most this far below
    -- production's.
    max_mean_drop         double precision NOT NULL DEFAULT 0.02 CHECK (max_mean_drop BETWEEN 0 AND 1),
    -- An item regresses when its reward falls more than regression_margin
    -- below production's on the same item; at most max_regressions may.
    regression_margin     double precision NOT NULL DEFAULT 0.1 CHECK (regression_margin BETWEEN 0 AND 1),
    max_regressions       integer NOT NULL DEFAULT 0 CHECK (max_regressions BETWEEN 0 AND 100000),
    -- No red-team item may be flagged unsafe that production's answer was not.
    no_new_red_team_flags boolean NOT NULL DEFAULT true,
    updated_by_label      text NOT NULL DEFAULT '',
    updated_at            timestamptz NOT NULL DEFAULT now()
);

-- An admin's written decision to deploy past a failing gate. Kept
-- forever: the database refuses to change or remove it.
CREATE TABLE gate_overrides (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id      uuid NOT NULL,
    version_id  uuid NOT NULL REFERENCES model_versions (id),
    reason      text NOT NULL CHECK (length(reason) BETWEEN 1 AND 2000),
    actor_label text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gate_overrides_version ON gate_overrides (org_id, version_id, id DESC);

-- +goose StatementBegin
CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER gate_overrides_no_update BEFORE UPDATE OR DELETE ON gate_overrides
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER gate_overrides_no_truncate BEFORE TRUNCATE ON gate_overrides
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();

-- +goose Down
DROP TABLE gate_overrides;
DROP FUNCTION refuse_change();
DROP TABLE evaluation_gates;
DROP TABLE evaluation_items;
DROP TABLE evaluation_runs;
DROP TYPE evaluation_status;
