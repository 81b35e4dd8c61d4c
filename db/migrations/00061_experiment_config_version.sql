-- +goose Up
-- Assignment keeps each experiment's configuration (its status, seed,
-- phase, coverage, and per arm the weight and where the arm's version is
-- served) in the memory of every process that assigns, and checks it
-- against a count of the changes made to it, inside the statement that
-- records the exposure. The count is the experiment's config_version plus
-- its arms' config_version, and triggers keep it: any change to what
-- assignment reads, made by any server or job, raises it in the same
-- transaction.
--
-- Changes to what an arm's deployment serves (its status, unloaded_at,
-- served name or target), to its target's address and to its version's
-- name or model id are counted on the arms that call them. Counting them on
-- the arm rather than on the experiment keeps the lock order of the code
-- that holds a deployment: the start of an experiment locks the experiment
-- and then the deployment, while an unload locks the deployment and would
-- otherwise then wait for the experiment.
ALTER TABLE experiments ADD COLUMN config_version bigint NOT NULL DEFAULT 1;
ALTER TABLE experiment_arms ADD COLUMN config_version bigint NOT NULL DEFAULT 1;

-- +goose StatementBegin
CREATE FUNCTION experiment_config_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.config_version := OLD.config_version + 1;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER experiments_config_changed BEFORE UPDATE ON experiments FOR EACH ROW
    WHEN ((OLD.status, OLD.seed, OLD.phase, OLD.coverage, OLD.key, OLD.org_id)
          IS DISTINCT FROM (NEW.status, NEW.seed, NEW.phase, NEW.coverage, NEW.key, NEW.org_id))
    EXECUTE FUNCTION experiment_config_changed();
CREATE TRIGGER experiment_arms_config_changed BEFORE UPDATE ON experiment_arms FOR EACH ROW
    WHEN ((OLD.idx, OLD.name, OLD.weight, OLD.model_version_id, OLD.deployment_id)
          IS DISTINCT FROM (NEW.idx, NEW.name, NEW.weight, NEW.model_version_id, NEW.deployment_id))
    EXECUTE FUNCTION experiment_config_changed();

-- +goose StatementBegin
CREATE FUNCTION experiment_arms_served_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    CASE TG_TABLE_NAME
    WHEN 'deployments' THEN
        UPDATE experiment_arms SET config_version = config_version + 1 WHERE deployment_id = NEW.id;
    WHEN 'serving_targets' THEN
        UPDATE experiment_arms a SET config_version = a.config_version + 1
        FROM deployments d WHERE d.target_id = NEW.id AND a.deployment_id = d.id;
    WHEN 'model_versions' THEN
        UPDATE experiment_arms SET config_version = config_version + 1 WHERE model_version_id = NEW.id;
    END CASE;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER deployments_served_changed AFTER UPDATE ON deployments FOR EACH ROW
    WHEN ((OLD.status, OLD.unloaded_at, OLD.served_name, OLD.target_id)
          IS DISTINCT FROM (NEW.status, NEW.unloaded_at, NEW.served_name, NEW.target_id))
    EXECUTE FUNCTION experiment_arms_served_changed();
CREATE TRIGGER serving_targets_served_changed AFTER UPDATE ON serving_targets FOR EACH ROW
    WHEN ((OLD.name, OLD.kind, OLD.base_url) IS DISTINCT FROM (NEW.name, NEW.kind, NEW.base_url))
    EXECUTE FUNCTION experiment_arms_served_changed();
CREATE TRIGGER model_versions_served_changed AFTER UPDATE ON model_versions FOR EACH ROW
    WHEN ((OLD.version, OLD.model_id, OLD.kind) IS DISTINCT FROM (NEW.version, NEW.model_id, NEW.kind))
    EXECUTE FUNCTION experiment_arms_served_changed();
CREATE INDEX experiment_arms_model_version ON experiment_arms (model_version_id);

-- Exposures reported by clients that assign units themselves: a unit
-- reported in an arm other than its recorded one is counted once in the
-- experiment's conflicts (a unit seen in two arms), however often it is
-- reported so.
ALTER TABLE experiment_exposures ADD COLUMN seen_in_other_arm boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE experiment_exposures DROP COLUMN seen_in_other_arm;
DROP INDEX experiment_arms_model_version;
DROP TRIGGER model_versions_served_changed ON model_versions;
DROP TRIGGER serving_targets_served_changed ON serving_targets;
DROP TRIGGER deployments_served_changed ON deployments;
DROP FUNCTION experiment_arms_served_changed();
DROP TRIGGER experiment_arms_config_changed ON experiment_arms;
DROP TRIGGER experiments_config_changed ON experiments;
DROP FUNCTION experiment_config_changed();
ALTER TABLE experiment_arms DROP COLUMN config_version;
ALTER TABLE experiments DROP COLUMN config_version;
