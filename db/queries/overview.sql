-- The start page's counts: one small query per card.

-- name: DatasetCountReady :one
-- Datasets frozen into a version that no export has written yet (the
-- status "ready": an export moves it to "exported").
SELECT count(*)::bigint FROM training_datasets WHERE org_id = @org_id AND status = 'ready';

-- name: FineTuneJobCountActive :one
-- Jobs that have not ended: from launch until success, failure or cancel.
SELECT count(*)::bigint FROM fine_tuning_jobs
WHERE org_id = @org_id AND status NOT IN ('succeeded', 'failed', 'cancelled');

-- name: AlertCountOpen :one
-- Alerts that still hold and nobody dismissed: those the banners show.
SELECT count(*)::bigint FROM alerts WHERE org_id = @org_id AND resolved_at IS NULL AND dismissed_at IS NULL;

-- name: ModelAliasListForOverview :many
-- What every alias of every registered model names, production first: the
-- models in production and the versions waiting under other aliases.
SELECT rm.name AS model_name, a.alias, v.id AS version_id, v.version, a.updated_at
FROM model_aliases a
JOIN registered_models rm ON rm.id = a.registered_model_id
JOIN model_versions v ON v.id = a.version_id
WHERE a.org_id = @org_id
ORDER BY a.alias <> 'production', rm.name, a.alias
LIMIT 20;

-- name: DeploymentListInProgress :many
-- Deployments queued or under way, oldest first.
SELECT d.id, d.version_id, d.alias, d.action, d.status, d.created_at, rm.name AS model_name, v.version,
       coalesce(t.name, '')::text AS target_name
FROM deployments d
JOIN registered_models rm ON rm.id = d.registered_model_id
JOIN model_versions v ON v.id = d.version_id
LEFT JOIN serving_targets t ON t.id = d.target_id
WHERE d.org_id = @org_id AND d.status IN ('queued', 'running')
ORDER BY d.created_at, d.id
LIMIT 10;

-- name: ExperimentListRunningOrPaused :many
-- Experiments that are on (running) or held (paused): running first, each
-- latest started first.
SELECT key, name, status, stop_reason, started_at
FROM experiments
WHERE org_id = @org_id AND status IN ('running', 'paused')
ORDER BY status <> 'running', started_at DESC NULLS LAST, key
LIMIT 10;

-- name: EvaluationRunListRunningOrFailed :many
-- Evaluation runs not finished (queued, running or paused), and those that
-- failed in the last seven days, newest first.
SELECT r.id, r.status, r.done, r.total, r.error, r.paused_reason, r.created_at,
       coalesce(rm.name || ' ' || mv.version, nullif(r.candidate_endpoint, ''), 'an endpoint')::text AS candidate_label,
       coalesce(g.name, d.name || ' v' || dv.number)::text AS golden_set_name
FROM evaluation_runs r
JOIN dataset_versions dv ON dv.id = r.golden_set_version_id
JOIN training_datasets d ON d.id = dv.dataset_id
LEFT JOIN golden_sets g ON g.version_id = r.golden_set_version_id
LEFT JOIN model_versions mv ON mv.id = r.candidate_version_id
LEFT JOIN registered_models rm ON rm.id = mv.registered_model_id
WHERE r.org_id = @org_id
  AND (r.status IN ('queued', 'running', 'paused') OR (r.status = 'failed' AND r.finished_at > now() - interval '7 days'))
ORDER BY r.created_at DESC, r.id
LIMIT 10;
