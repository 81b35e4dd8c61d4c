-- +goose Up
-- What a target serves, kept in step with it: a deployment serves its
-- version from the moment it succeeds (the target listed it) until
-- unloaded_at, set before its adapter is unloaded, or when the target is
-- found no longer listing it. Nothing is sent to a deployment once it is
-- set.
ALTER TABLE deployments ADD COLUMN unloaded_at timestamptz;
UPDATE deployments d SET unloaded_at = h.at
FROM (SELECT deployment_id, max(at) AS at FROM model_history WHERE action = 'unloaded' AND deployment_id IS NOT NULL
      GROUP BY deployment_id) h
WHERE h.deployment_id = d.id;
CREATE INDEX deployments_served ON deployments (org_id, version_id, finished_at DESC)
    WHERE status = 'succeeded' AND unloaded_at IS NULL;

-- A "load" puts a version on a target for an experiment's arm without
-- moving any alias; its alias column names the experiment. One load of a
-- version on a target at a time, and loads do not hold up an alias.
ALTER TABLE deployments DROP CONSTRAINT deployments_action_check;
ALTER TABLE deployments ADD CONSTRAINT deployments_action_check CHECK (action IN ('deploy', 'rollback', 'load'));
DROP INDEX deployments_one_active_per_alias;
CREATE UNIQUE INDEX deployments_one_active_per_alias ON deployments (registered_model_id, alias)
    WHERE status IN ('queued', 'running') AND action <> 'load';
CREATE UNIQUE INDEX deployments_one_active_load ON deployments (version_id, target_id)
    WHERE status IN ('queued', 'running') AND action = 'load';

-- The deployment each arm is called at, chosen when the experiment starts;
-- while the experiment runs or is paused, it is not unloaded.
ALTER TABLE experiment_arms ADD COLUMN deployment_id uuid REFERENCES deployments (id) ON DELETE SET NULL;
CREATE INDEX experiment_arms_deployment ON experiment_arms (deployment_id) WHERE deployment_id IS NOT NULL;
-- Experiments running or paused now are called where their versions are
-- served now.
UPDATE experiment_arms a SET deployment_id = (
    SELECT d.id FROM deployments d
    WHERE d.version_id = a.model_version_id AND d.status = 'succeeded' AND d.unloaded_at IS NULL AND d.target_id IS NOT NULL
    ORDER BY d.finished_at DESC, d.created_at DESC LIMIT 1)
FROM experiments e
WHERE e.id = a.experiment_id AND e.status IN ('running', 'paused');

-- +goose Down
DROP INDEX experiment_arms_deployment;
ALTER TABLE experiment_arms DROP COLUMN deployment_id;
DROP INDEX deployments_one_active_load;
DROP INDEX deployments_one_active_per_alias;
DELETE FROM deployments WHERE action = 'load';
CREATE UNIQUE INDEX deployments_one_active_per_alias ON deployments (registered_model_id, alias)
    WHERE status IN ('queued', 'running');
ALTER TABLE deployments DROP CONSTRAINT deployments_action_check;
ALTER TABLE deployments ADD CONSTRAINT deployments_action_check CHECK (action IN ('deploy', 'rollback'));
DROP INDEX deployments_served;
ALTER TABLE deployments DROP COLUMN unloaded_at;
