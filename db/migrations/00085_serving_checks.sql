-- +goose Up
-- What each serving target listed when it was last asked (GET /v1/models
-- on vLLM): asked by the periodic serving check, and by every deployment
-- that loads or verifies an adapter there. An alias resolves only to a
-- model its target listed at a check no older than the check's interval.
CREATE TABLE serving_checks (
    target_id  uuid PRIMARY KEY,
    org_id     uuid NOT NULL,
    checked_at timestamptz NOT NULL DEFAULT now(),
    healthy    boolean NOT NULL,
    -- Why the target could not be asked, in words; '' when it answered.
    error      text NOT NULL DEFAULT '',
    -- The ids of what the target listed.
    models     text[] NOT NULL DEFAULT '{}',
    FOREIGN KEY (org_id, target_id) REFERENCES serving_targets (org_id, id) ON DELETE CASCADE
);

-- A reload puts back, under a new served name, what a deployment loaded
-- once its target stopped listing it while an alias or a running
-- experiment's arm still called it: "reload" for the alias's deployment
-- (it moves the alias to the same version), "load" for an arm's.
ALTER TABLE deployments ADD COLUMN reload_of uuid REFERENCES deployments (id) ON DELETE SET NULL;
CREATE INDEX deployments_reload_of ON deployments (reload_of) WHERE reload_of IS NOT NULL;
ALTER TABLE deployments DROP CONSTRAINT deployments_action_check;
ALTER TABLE deployments ADD CONSTRAINT deployments_action_check CHECK (action IN ('deploy', 'rollback', 'load', 'reload'));

-- What resolving an alias answers while its target does not list its
-- version: nothing (503), or the alias's last version still listed.
ALTER TABLE model_aliases ADD COLUMN fallback text NOT NULL DEFAULT 'none' CHECK (fallback IN ('none', 'last_healthy'));

-- The alert a version missing from its target opens, kept as the other
-- kinds are (see migration 00059).
-- +goose StatementBegin
DO $$
DECLARE def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'alerts'::regclass AND conname = 'alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check ' || replace(def, 'ARRAY[', 'ARRAY[''serving_missing''::text, ');
END $$;
-- +goose StatementEnd

-- +goose Down
DELETE FROM alerts WHERE kind = 'serving_missing';
-- +goose StatementBegin
DO $$
DECLARE def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'alerts'::regclass AND conname = 'alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check';
    EXECUTE 'ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check ' || replace(def, '''serving_missing''::text, ', '');
END $$;
-- +goose StatementEnd
ALTER TABLE model_aliases DROP COLUMN fallback;
DELETE FROM deployments WHERE action = 'reload';
ALTER TABLE deployments DROP CONSTRAINT deployments_action_check;
ALTER TABLE deployments ADD CONSTRAINT deployments_action_check CHECK (action IN ('deploy', 'rollback', 'load'));
DROP INDEX deployments_reload_of;
ALTER TABLE deployments DROP COLUMN reload_of;
DROP TABLE serving_checks;
