-- The model registry: registered models, versions, aliases, serving
-- targets, deployments and their history (internal/models).

-- name: RegisteredModelInsertOrGet :one
-- Registering under a name that exists adds to it; the no-op update makes
-- RETURNING answer the existing row.
INSERT INTO registered_models (org_id, name, description)
VALUES (@org_id, @name, @description)
ON CONFLICT (org_id, name) DO UPDATE SET name = EXCLUDED.name
RETURNING *;

-- name: RegisteredModelGetForUpdate :one
SELECT * FROM registered_models WHERE org_id = @org_id AND id = @id FOR UPDATE;

-- name: RegisteredModelGetByName :one
SELECT * FROM registered_models WHERE org_id = @org_id AND name = @name;

-- name: RegisteredModelList :many
SELECT * FROM registered_models WHERE org_id = @org_id ORDER BY name;

-- name: RegisteredModelUpdate :exec
UPDATE registered_models SET description = @description, tags = @tags
WHERE org_id = @org_id AND id = @id;

-- name: ModelVersionInsert :one
INSERT INTO model_versions (
    org_id, registered_model_id, version, kind, model_id, base_model,
    fine_tuning_job_id, dataset_version_id, dataset_hash, train_loss, valid_loss,
    trained_tokens, cost_micros, created_by_label, performance_metrics
) VALUES (
    @org_id, @registered_model_id, @version, @kind, @model_id, @base_model,
    @fine_tuning_job_id, @dataset_version_id, @dataset_hash, sqlc.narg('train_loss'), sqlc.narg('valid_loss'),
    @trained_tokens, sqlc.narg('cost_micros'), @created_by_label,
    -- What is known at registration (seed 000 asks for the training loss
    -- and the dataset hash of every version); evaluations add their score.
    jsonb_strip_nulls(jsonb_build_object('training_loss', sqlc.narg('train_loss')::float8,
        'validation_loss', sqlc.narg('valid_loss')::float8, 'dataset_hash', nullif(@dataset_hash::text, '')))
)
RETURNING *;

-- name: ModelVersionGet :one
SELECT sqlc.embed(v), sqlc.embed(m)
FROM model_versions v JOIN registered_models m ON m.id = v.registered_model_id
WHERE v.org_id = @org_id AND v.id = @id;

-- name: ModelVersionGetForUpdate :one
SELECT * FROM model_versions WHERE org_id = @org_id AND id = @id FOR UPDATE;

-- name: ModelVersionGetByJob :one
SELECT * FROM model_versions WHERE org_id = @org_id AND fine_tuning_job_id = @fine_tuning_job_id;

-- name: ModelVersionListSemver :many
-- Every version number of a registered model, to propose the next one.
SELECT version, dataset_hash FROM model_versions
WHERE org_id = @org_id AND registered_model_id = @registered_model_id;

-- name: ModelVersionList :many
SELECT sqlc.embed(v), m.name AS model_name
FROM model_versions v JOIN registered_models m ON m.id = v.registered_model_id
WHERE v.org_id = @org_id
  AND (@name::text = '' OR m.name = @name)
  AND (@status::text = '' OR v.status::text = @status)
  AND (@alias::text = '' OR EXISTS (
       SELECT 1 FROM model_aliases a WHERE a.version_id = v.id AND a.alias = @alias))
  AND (sqlc.narg('registered_model_id')::uuid IS NULL OR v.registered_model_id = sqlc.narg('registered_model_id'))
  AND (sqlc.narg('before_at')::timestamptz IS NULL OR (v.created_at, v.id) < (sqlc.narg('before_at')::timestamptz, @before_id::uuid))
ORDER BY v.created_at DESC, v.id DESC
LIMIT @row_limit;

-- name: ModelVersionUpdate :exec
UPDATE model_versions SET version = @version, status = @status
WHERE org_id = @org_id AND id = @id;

-- name: ModelAliasListByModels :many
SELECT a.* FROM model_aliases a
WHERE a.org_id = @org_id AND a.registered_model_id = ANY(@registered_model_ids::uuid[])
ORDER BY a.alias;

-- name: ModelAliasGet :one
SELECT * FROM model_aliases WHERE org_id = @org_id AND registered_model_id = @registered_model_id AND alias = @alias;

-- name: ModelAliasUpdateVersion :exec
-- Points an alias at a version, creating it on first use.
INSERT INTO model_aliases (org_id, registered_model_id, alias, version_id)
VALUES (@org_id, @registered_model_id, @alias, @version_id)
ON CONFLICT (registered_model_id, alias) DO UPDATE SET version_id = EXCLUDED.version_id, updated_at = now();

-- name: ModelHistoryInsert :exec
INSERT INTO model_history (
    org_id, registered_model_id, actor_label, action, alias, from_version, to_version,
    target, reason, result, deployment_id
) VALUES (
    @org_id, @registered_model_id, @actor_label, @action, @alias, @from_version, @to_version,
    @target, @reason, @result, @deployment_id
);

-- name: ModelHistoryList :many
SELECT * FROM model_history
WHERE org_id = @org_id AND registered_model_id = @registered_model_id
  AND (@before_id::bigint = 0 OR id < @before_id)
ORDER BY id DESC
LIMIT @row_limit;

-- name: ServingTargetInsert :one
INSERT INTO serving_targets (org_id, name, kind, base_url, api_key_ciphertext, api_key_nonce, unload_grace_s)
VALUES (@org_id, @name, @kind, @base_url, @api_key_ciphertext, @api_key_nonce, @unload_grace_s)
RETURNING *;

-- name: ServingTargetList :many
SELECT * FROM serving_targets WHERE org_id = @org_id ORDER BY name;

-- name: ServingTargetGetByName :one
SELECT * FROM serving_targets WHERE org_id = @org_id AND name = @name;

-- name: ServingTargetGet :one
SELECT * FROM serving_targets WHERE org_id = @org_id AND id = @id;

-- name: ModelAliasCountByVersion :one
SELECT count(*) FROM model_aliases WHERE org_id = @org_id AND version_id = @version_id;

-- name: ModelVersionUpdateDeployed :exec
UPDATE model_versions SET status = 'deployed', deployed_at = now()
WHERE org_id = @org_id AND id = @id;

-- name: ModelVersionUpdateStatus :exec
UPDATE model_versions SET status = @status WHERE org_id = @org_id AND id = @id;

-- name: DeploymentInsert :one
INSERT INTO deployments (
    org_id, registered_model_id, version_id, target_id, alias, action, reason,
    previous_version_id, served_name, created_by, created_by_label, reload_of
) VALUES (
    @org_id, @registered_model_id, @version_id, @target_id, @alias, @action, @reason,
    @previous_version_id, @served_name, @created_by, @created_by_label, @reload_of
)
RETURNING *;

-- name: DeploymentUpdateRiverID :exec
UPDATE deployments SET river_job_id = @river_job_id WHERE id = @id;

-- name: DeploymentGet :one
SELECT * FROM deployments WHERE org_id = @org_id AND id = @id;

-- name: DeploymentGetByID :one
-- For the worker, which knows the deployment only by its id.
SELECT * FROM deployments WHERE id = @id;

-- name: DeploymentGetForUpdate :one
SELECT * FROM deployments WHERE id = @id FOR UPDATE;

-- name: DeploymentUpdateRunning :exec
UPDATE deployments SET status = 'running' WHERE id = @id AND status = 'queued';

-- name: DeploymentUpdateLoaded :execrows
UPDATE deployments SET loaded_at = now() WHERE id = @id AND loaded_at IS NULL;

-- name: DeploymentUpdateVerified :exec
UPDATE deployments SET verified_at = now() WHERE id = @id AND verified_at IS NULL;

-- name: DeploymentUpdateSucceeded :exec
-- A load moves no alias.
UPDATE deployments SET status = 'succeeded', alias_moved_at = CASE WHEN action <> 'load' THEN now() END, finished_at = now()
WHERE id = @id;

-- name: DeploymentUpdateFailed :exec
UPDATE deployments SET status = 'failed', error = @error, finished_at = now()
WHERE id = @id AND status IN ('queued', 'running');

-- name: DeploymentGetLatestSucceeded :one
-- The deployment that put the alias's current version in place.
SELECT * FROM deployments
WHERE org_id = @org_id AND registered_model_id = @registered_model_id AND alias = @alias AND status = 'succeeded'
  AND action <> 'load'
ORDER BY alias_moved_at DESC, created_at DESC
LIMIT 1;

-- name: DeploymentGetActiveForAlias :one
-- The deployment under way for an alias, if any.
SELECT * FROM deployments
WHERE registered_model_id = @registered_model_id AND alias = @alias AND status IN ('queued', 'running') AND action <> 'load';

-- name: DeploymentGetActiveLoad :one
-- The load of a version on a target under way, if any.
SELECT * FROM deployments
WHERE version_id = @version_id AND target_id = @target_id AND status IN ('queued', 'running') AND action = 'load';

-- name: DeploymentListServed :many
-- Where a version is served now, as the records kept in step with each
-- target say: its deployments that succeeded and were not unloaded since,
-- newest first, each with its target.
SELECT sqlc.embed(d), sqlc.embed(t) FROM deployments d
JOIN serving_targets t ON t.org_id = d.org_id AND t.id = d.target_id
WHERE d.org_id = @org_id AND d.version_id = @version_id AND d.status = 'succeeded' AND d.unloaded_at IS NULL
ORDER BY d.finished_at DESC, d.created_at DESC
LIMIT 20;

-- name: DeploymentGetHomeTarget :one
-- Where a version would be called: the target of its own newest
-- deployment, else of its model's production alias, else of the model's
-- newest deployment.
SELECT target_id::uuid FROM deployments
WHERE org_id = @org_id AND registered_model_id = @registered_model_id AND status = 'succeeded' AND target_id IS NOT NULL
ORDER BY version_id = @version_id DESC, (alias = 'production' AND action <> 'load') DESC, finished_at DESC
LIMIT 1;

-- name: DeploymentGetInUse :one
-- Whether something still sends requests to a deployment: its alias's
-- current deployment is this one, or an arm of a running or paused
-- experiment is called at it. Read after locking the deployment's row,
-- which starting an experiment locks too.
SELECT ((d.action <> 'load' AND d.id = (
            SELECT x.id FROM deployments x
            WHERE x.registered_model_id = d.registered_model_id AND x.alias = d.alias AND x.status = 'succeeded' AND x.action <> 'load'
            ORDER BY x.alias_moved_at DESC, x.created_at DESC LIMIT 1))
        OR EXISTS (
            SELECT 1 FROM experiment_arms a JOIN experiments e ON e.id = a.experiment_id
            WHERE a.deployment_id = d.id AND e.status IN ('running', 'paused')))::bool AS in_use
FROM deployments d WHERE d.id = @id;

-- name: DeploymentCountSharingName :one
-- The other deployments on a deployment's target that still hold its served
-- name (a production deployment that took over an experiment's loaded
-- adapter, say): while one does, the adapter stays loaded.
SELECT count(*) FROM deployments x JOIN deployments d ON d.id = @id
WHERE x.org_id = d.org_id AND x.id <> d.id AND x.target_id = d.target_id AND x.served_name = d.served_name
  AND x.unloaded_at IS NULL AND x.status <> 'failed';

-- name: DeploymentUpdateUnloaded :execrows
-- The deployment's version is no longer served: set before its adapter
-- is unloaded, or when the target no longer lists it.
UPDATE deployments SET unloaded_at = now() WHERE id = @id AND unloaded_at IS NULL;

-- name: DeploymentListByVersion :many
SELECT sqlc.embed(d), coalesce(t.name, '') AS target_name FROM deployments d
LEFT JOIN serving_targets t ON t.id = d.target_id
WHERE d.org_id = @org_id AND d.version_id = @version_id
ORDER BY d.created_at DESC
LIMIT 100;

-- name: ModelVersionListTrainingItems :many
-- The first items of the dataset version a model was trained on (training
-- split first, in the primary key's order), each with the feedback item it
-- came from (itself, or a pair's chosen answer).
SELECT i.source_id, i.split, (f.id IS NOT NULL)::bool AS is_feedback,
       coalesce(f.query, p.query, '')::text AS query,
       coalesce(f.id, p.chosen_feedback_id) AS feedback_id
FROM dataset_version_items i
LEFT JOIN feedback f ON f.id = i.source_id AND f.org_id = @org_id
LEFT JOIN preference_pairs p ON p.id = i.source_id AND p.org_id = @org_id
WHERE i.version_id = @version_id
ORDER BY i.split, i.content_sha, i.source_id
LIMIT @row_limit;

-- name: ModelVersionCountTrainingSources :many
-- How many items of a dataset version came from each source: feedback by
-- where it was collected (corrections apart), pairs by how they were made.
SELECT 'feedback'::text AS kind, f.source::text AS source, (f.status = 'corrected')::bool AS corrected, count(*)::int AS n
FROM dataset_version_items i JOIN feedback f ON f.id = i.source_id AND f.org_id = @org_id
WHERE i.version_id = @version_id
GROUP BY f.source, f.status = 'corrected'
UNION ALL
SELECT 'pair'::text, p.method::text, false, count(*)::int
FROM dataset_version_items i JOIN preference_pairs p ON p.id = i.source_id AND p.org_id = @org_id
WHERE i.version_id = @version_id
GROUP BY p.method
ORDER BY 1, 2, 3;

-- name: ModelVersionListByFeedback :many
-- The model versions trained on data holding a feedback item, directly or
-- through a pair built from it.
SELECT DISTINCT v.id, m.name, v.version, v.status, dv.number AS dataset_number, d.id AS dataset_id, d.name AS dataset_name
FROM dataset_version_items i
JOIN dataset_versions dv ON dv.id = i.version_id AND dv.org_id = @org_id
JOIN training_datasets d ON d.id = dv.dataset_id
JOIN model_versions v ON v.dataset_version_id = dv.id
JOIN registered_models m ON m.id = v.registered_model_id
WHERE i.source_id = @feedback_id
   OR i.source_id IN (SELECT p.id FROM preference_pairs p
                      WHERE p.org_id = @org_id AND (p.chosen_feedback_id = @feedback_id OR p.rejected_feedback_id = @feedback_id))
ORDER BY m.name, v.version;

-- name: DatasetVersionGetForModel :one
SELECT dv.*, d.name AS dataset_name FROM dataset_versions dv JOIN training_datasets d ON d.id = dv.dataset_id
WHERE dv.org_id = @org_id AND dv.id = @id;

-- name: ModelVersionGetTrainingSummary :one
-- What a finished job trained on and its last reported losses, read in the
-- transaction that marks it succeeded, to register its model.
SELECT dv.id AS dataset_version_id, coalesce(d.name, '')::text AS dataset_name, coalesce(dv.content_hash, '')::text AS content_hash,
       (SELECT m.train_loss FROM fine_tuning_metrics m WHERE m.job_id = j.id AND m.train_loss IS NOT NULL ORDER BY m.step DESC LIMIT 1) AS train_loss,
       (SELECT m.valid_loss FROM fine_tuning_metrics m WHERE m.job_id = j.id AND m.valid_loss IS NOT NULL ORDER BY m.step DESC LIMIT 1) AS valid_loss
FROM fine_tuning_jobs j
LEFT JOIN dataset_versions dv ON dv.id = j.dataset_version_id AND dv.org_id = j.org_id
LEFT JOIN training_datasets d ON d.id = dv.dataset_id
WHERE j.org_id = @org_id AND j.id = @job_id;

-- name: DeploymentUpdateServedName :exec
-- The name a target that serves what it was started with (a vLLM pooling
-- runner) lists the version under, found when it was asked.
UPDATE deployments SET served_name = @served_name WHERE id = @id;

-- name: ModelAliasGetByModelName :one
-- The version an alias of a registered model, named, holds.
SELECT a.version_id FROM model_aliases a
JOIN registered_models m ON m.org_id = a.org_id AND m.id = a.registered_model_id
WHERE m.org_id = @org_id AND m.name = @name AND a.alias = @alias;

-- name: DeploymentGetScoring :one
-- Where a reward model scores, in one statement for best-of-N's sake: the
-- version (by its id, or by its registered model's name and an alias) and
-- the newest of its deployments still served (as DeploymentListServed
-- reads them) by a target of the kind that scores. No row when there is
-- none; the caller then reads why.
SELECT v.id AS version_id, v.version, m.name AS model_name, d.served_name, sqlc.embed(t)
FROM model_versions v
JOIN registered_models m ON m.org_id = v.org_id AND m.id = v.registered_model_id
JOIN deployments d ON d.org_id = v.org_id AND d.version_id = v.id AND d.status = 'succeeded' AND d.unloaded_at IS NULL AND d.served_name <> ''
JOIN serving_targets t ON t.org_id = d.org_id AND t.id = d.target_id AND t.kind = @target_kind
WHERE v.org_id = @org_id AND v.kind = @version_kind
  AND v.id = coalesce(sqlc.narg('version_id')::uuid,
      (SELECT a.version_id FROM model_aliases a
       JOIN registered_models am ON am.org_id = a.org_id AND am.id = a.registered_model_id
       WHERE am.org_id = @org_id AND am.name = sqlc.narg('name') AND a.alias = sqlc.narg('alias')))
ORDER BY d.finished_at DESC, d.created_at DESC
LIMIT 1;

-- name: ModelVersionUpdateEvaluation :exec
-- A finished evaluation's summary on the version it evaluated, and its
-- figures in the version's performance metrics in place of the last's.
UPDATE model_versions SET evaluation = @evaluation,
    performance_metrics = (performance_metrics - 'eval_score' - 'eval_ci' - 'golden_set_hash' - 'latency_ms') || @metrics::jsonb
WHERE org_id = @org_id AND id = @id;

-- name: ServingCheckInsertOrUpdate :exec
-- Records what a target answered when asked what it serves.
INSERT INTO serving_checks (target_id, org_id, checked_at, healthy, error, models)
VALUES (@target_id, @org_id, now(), @healthy, @error, @models::text[])
ON CONFLICT (target_id) DO UPDATE
SET checked_at = now(), healthy = EXCLUDED.healthy, error = EXCLUDED.error, models = EXCLUDED.models;

-- name: ServingCheckGet :one
SELECT * FROM serving_checks WHERE org_id = @org_id AND target_id = @target_id;

-- name: ServingCheckList :many
-- The organisation's targets' last checks.
SELECT * FROM serving_checks WHERE org_id = @org_id;

-- name: ServingTargetListPolled :many
-- The targets of every organisation that list what they serve, for the
-- periodic serving check: it asks each, and writes what it finds on that
-- target's organisation's rows.
SELECT * FROM serving_targets WHERE kind IN ('vllm', 'vllm_pooling') ORDER BY org_id, name;

-- name: DeploymentListInUseOnTarget :many
-- The deployments on a target that something calls: the current
-- deployment of an alias, or the deployment an arm of a running
-- experiment is called at (the first such experiment's key), with the
-- version's number and the model's name, and whether a reload of it is
-- under way or failed in the last ten minutes.
WITH current AS (
    SELECT DISTINCT ON (registered_model_id, alias) id
    FROM deployments
    WHERE org_id = @org_id AND status = 'succeeded' AND action <> 'load'
    ORDER BY registered_model_id, alias, alias_moved_at DESC, created_at DESC
), arms AS (
    SELECT a.deployment_id AS id, min(e.key) AS key
    FROM experiment_arms a JOIN experiments e ON e.id = a.experiment_id
    WHERE e.org_id = @org_id AND e.status = 'running' AND a.deployment_id IS NOT NULL
    GROUP BY a.deployment_id
)
SELECT sqlc.embed(d), mv.version, m.name AS model_name,
       (c.id IS NOT NULL)::bool AS alias_current, coalesce(ar.key, '')::text AS experiment_key,
       EXISTS (SELECT 1 FROM deployments r WHERE r.reload_of = d.id
               AND (r.status IN ('queued', 'running') OR (r.status = 'failed' AND r.finished_at > now() - interval '10 minutes')))::bool AS reloading
FROM deployments d
JOIN model_versions mv ON mv.org_id = d.org_id AND mv.id = d.version_id
JOIN registered_models m ON m.org_id = d.org_id AND m.id = d.registered_model_id
LEFT JOIN current c ON c.id = d.id
LEFT JOIN arms ar ON ar.id = d.id
WHERE d.org_id = @org_id AND d.target_id = @target_id AND d.status = 'succeeded' AND d.served_name <> ''
  AND (c.id IS NOT NULL OR ar.id IS NOT NULL)
ORDER BY d.created_at;

-- name: DeploymentListSucceededForAlias :many
-- The deployments that put a version under an alias and are still
-- served, newest first, each with its target: where a fallback is found.
SELECT sqlc.embed(d), sqlc.embed(t), mv.version FROM deployments d
JOIN serving_targets t ON t.org_id = d.org_id AND t.id = d.target_id
JOIN model_versions mv ON mv.org_id = d.org_id AND mv.id = d.version_id
WHERE d.org_id = @org_id AND d.registered_model_id = @registered_model_id AND d.alias = @alias
  AND d.status = 'succeeded' AND d.action <> 'load' AND d.unloaded_at IS NULL
ORDER BY d.alias_moved_at DESC, d.created_at DESC
LIMIT 20;

-- name: ModelAliasUpdateFallback :execrows
UPDATE model_aliases SET fallback = @fallback
WHERE org_id = @org_id AND registered_model_id = @registered_model_id AND alias = @alias;
