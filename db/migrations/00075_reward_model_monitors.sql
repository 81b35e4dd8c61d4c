-- +goose Up
-- A reward model in production is watched like an answering model, on what
-- only Curate sees of it: each request sent to its server, how long the
-- answer took and the score it gave. Its latency monitor reads the p95 of
-- the requests of the monitors' window (seed 001's serving SLA: 100 ms);
-- its drift monitor sets the mean live score of the shift window against
-- that of the version's first week served. purpose says who asked: live
-- traffic (best-of-N, live scoring), an evaluation run or a training run's
-- reward; only live scores count for drift.
CREATE TABLE reward_model_calls (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    version_id  uuid NOT NULL,
    purpose     text NOT NULL CHECK (purpose IN ('live', 'evaluation', 'training')),
    latency_ms  double precision NOT NULL CHECK (latency_ms >= 0),
    -- The score in 0–1; NULL when the server could not score the answer.
    score       double precision CHECK (score >= 0 AND score <= 1),
    created_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (org_id, version_id) REFERENCES model_versions (org_id, id) ON DELETE CASCADE
);
CREATE INDEX reward_model_calls_version ON reward_model_calls (org_id, version_id, created_at);

ALTER TABLE monitor_settings
    ADD COLUMN reward_latency_p95_ms integer NOT NULL DEFAULT 100 CHECK (reward_latency_p95_ms BETWEEN 1 AND 3600000),
    ADD COLUMN reward_drift double precision NOT NULL DEFAULT 0.1 CHECK (reward_drift > 0 AND reward_drift < 1);

-- Their breaches are alerts of their own kinds; the kinds other migrations
-- allow are kept, the constraint rebuilt from its current definition.
-- +goose StatementBegin
DO $$
DECLARE def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'alerts'::regclass AND conname = 'alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check '
        || replace(def, 'ARRAY[', 'ARRAY[''monitor_reward_latency''::text, ''monitor_reward_drift''::text, ');
END $$;
-- +goose StatementEnd

-- +goose Down
DELETE FROM alerts WHERE kind IN ('monitor_reward_latency', 'monitor_reward_drift');
-- +goose StatementBegin
DO $$
DECLARE def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'alerts'::regclass AND conname = 'alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check '
        || replace(def, '''monitor_reward_latency''::text, ''monitor_reward_drift''::text, ', '');
END $$;
-- +goose StatementEnd
ALTER TABLE monitor_settings DROP COLUMN reward_drift, DROP COLUMN reward_latency_p95_ms;
DROP TABLE reward_model_calls;
