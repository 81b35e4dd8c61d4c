-- +goose Up
-- Loop policies: per registered model, when to train again on new curated
-- data and how (the dataset recipe, the training, the evaluation, where
-- the new version is staged, an optional rollout, and where a person must
-- approve). spec is the policy as the API takes it, validated
-- (internal/loops); the columns beside it are what the trigger reads.
CREATE TABLE loop_policies (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (length(btrim(name)) > 0),
    registered_model text NOT NULL,
    status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    spec             jsonb NOT NULL,
    -- A run starts once this many items matching the trigger's filter are
    -- new since the last run (0: no count is asked), on schedule when one
    -- is set (both: on schedule, when enough are new).
    min_new_items    integer NOT NULL CHECK (min_new_items >= 0),
    schedule         text NOT NULL DEFAULT '' CHECK (schedule IN ('', 'hourly', 'daily', 'weekly')),
    created_by_label text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    version          integer NOT NULL DEFAULT 1,
    UNIQUE (org_id, name)
);
CREATE INDEX loop_policies_active_idx ON loop_policies (org_id) WHERE status = 'active';

-- A run of a loop: a chain of River jobs, one per step, each recording its
-- start, end, outcome, cost and what it made. spec is the policy as the
-- run started with it.
CREATE TABLE loop_runs (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id             uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    loop_id            uuid NOT NULL REFERENCES loop_policies (id) ON DELETE CASCADE,
    number             integer NOT NULL,
    status             text NOT NULL DEFAULT 'running'
                       CHECK (status IN ('running', 'waiting_approval', 'succeeded', 'failed', 'stopped', 'skipped')),
    reason             text NOT NULL DEFAULT '',
    started_by         text NOT NULL CHECK (started_by IN ('items', 'schedule', 'person')),
    started_by_label   text NOT NULL DEFAULT '',
    spec               jsonb NOT NULL,
    -- The step under way (or the last one taken).
    step               text NOT NULL,
    -- When collect counted: items created or reviewed after it are new to
    -- the next run.
    collected_at       timestamptz,
    content_hash       text NOT NULL DEFAULT '',
    dataset_version_id uuid,
    model_version_id   uuid,
    -- Where a person must approve, while the run waits for it.
    waiting_for        text NOT NULL DEFAULT '' CHECK (waiting_for IN ('', 'before_deploy', 'before_rollout')),
    approved_by_label  text NOT NULL DEFAULT '',
    approved_at        timestamptz,
    cost_micros        bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    finished_at        timestamptz,
    UNIQUE (loop_id, number)
);
-- One unfinished run per loop: a trigger and a person starting at once
-- start one.
CREATE UNIQUE INDEX loop_runs_one_open ON loop_runs (loop_id) WHERE status IN ('running', 'waiting_approval');
CREATE INDEX loop_runs_loop_idx ON loop_runs (loop_id, created_at DESC, id DESC);

-- The steps of a run, in order. links name what the step made or used
-- (dataset, dataset version, fine-tuning job, model version, deployment,
-- evaluation run, experiment): each artefact's page finds its run here.
CREATE TABLE loop_run_steps (
    run_id      uuid NOT NULL REFERENCES loop_runs (id) ON DELETE CASCADE,
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    position    smallint NOT NULL,
    name        text NOT NULL,
    status      text NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'running', 'waiting', 'succeeded', 'failed', 'skipped', 'stopped')),
    started_at  timestamptz,
    finished_at timestamptz,
    detail      text NOT NULL DEFAULT '',
    links       jsonb NOT NULL DEFAULT '{}',
    outcome     jsonb NOT NULL DEFAULT '{}',
    cost_micros bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, position),
    UNIQUE (run_id, name)
);
CREATE INDEX loop_run_steps_links_idx ON loop_run_steps USING gin (links jsonb_path_ops);

-- A failed run opens an alert of its own kind. The kinds other migrations
-- allow are kept as they are: the constraint is rebuilt from its current
-- definition with loop_run added.
-- +goose StatementBegin
DO $$
DECLARE def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'alerts'::regclass AND conname = 'alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check ' || replace(def, 'ARRAY[', 'ARRAY[''loop_run''::text, ');
END $$;
-- +goose StatementEnd

-- +goose Down
DELETE FROM alerts WHERE kind = 'loop_run';
-- +goose StatementBegin
DO $$
DECLARE def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'alerts'::regclass AND conname = 'alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check ' || replace(def, '''loop_run''::text, ', '');
END $$;
-- +goose StatementEnd
DROP TABLE loop_run_steps;
DROP TABLE loop_runs;
DROP TABLE loop_policies;
