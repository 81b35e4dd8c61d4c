-- A/B experiments, their arms and exposures, and feedback by arm.

-- name: ExperimentInsert :one
INSERT INTO experiments (org_id, key, name, registered_model_id, seed, coverage, metrics, guardrails, min_sample_per_arm,
    rollout_steps, rollout_hold, rollout_min_units, ends_at, created_by_label)
VALUES (@org_id, @key, @name, @registered_model_id, @seed, @coverage, @metrics, @guardrails, @min_sample_per_arm,
    @rollout_steps, @rollout_hold, @rollout_min_units, sqlc.narg('ends_at'), @created_by_label)
RETURNING *;

-- name: ExperimentArmInsert :exec
INSERT INTO experiment_arms (experiment_id, idx, name, model_version_id, weight)
VALUES (@experiment_id, @idx, @name, @model_version_id, @weight);

-- name: ExperimentGetByKey :one
SELECT * FROM experiments WHERE org_id = @org_id AND key = @key;

-- name: ExperimentGetByKeyForUpdate :one
SELECT * FROM experiments WHERE org_id = @org_id AND key = @key FOR UPDATE;

-- name: ExperimentList :many
SELECT * FROM experiments WHERE org_id = @org_id ORDER BY created_at DESC LIMIT 200;

-- name: ExperimentListRunningWithRollout :many
-- Running experiments with a rollout plan, for the periodic guardrail check.
SELECT * FROM experiments WHERE status = 'running' AND cardinality(rollout_steps) > 0;

-- name: ExperimentArmList :many
SELECT a.*, mv.version, mv.status AS version_status
FROM experiment_arms a JOIN model_versions mv ON mv.id = a.model_version_id
WHERE a.experiment_id = @experiment_id ORDER BY a.idx;

-- name: ExperimentArmListServed :many
-- The arms with where each is called: the deployment chosen when the
-- experiment started (none for a provider's model called by its id), its
-- served name and target, and whether it is still served.
SELECT a.idx, a.name, a.weight, mv.version, mv.model_id, coalesce(d.served_name, '')::text AS served_name,
       coalesce(t.base_url, '')::text AS base_url, coalesce(t.name, '')::text AS target_name,
       CASE WHEN d.id IS NULL THEN mv.kind = 'full' ELSE d.status = 'succeeded' AND d.unloaded_at IS NULL END::bool AS served
FROM experiment_arms a
JOIN model_versions mv ON mv.id = a.model_version_id
LEFT JOIN deployments d ON d.id = a.deployment_id
LEFT JOIN serving_targets t ON t.id = d.target_id
WHERE a.experiment_id = @experiment_id ORDER BY a.idx;

-- name: ExperimentArmUpdateDeployment :exec
UPDATE experiment_arms SET deployment_id = @deployment_id WHERE experiment_id = @experiment_id AND idx = @idx;

-- name: ExperimentArmUpdateWeight :exec
UPDATE experiment_arms SET weight = @weight WHERE experiment_id = @experiment_id AND idx = @idx;

-- name: ExperimentUpdateStatus :one
UPDATE experiments SET status = @status, started_at = coalesce(started_at, CASE WHEN @status = 'running'::experiment_status THEN now() END),
    ended_at = CASE WHEN @status IN ('completed', 'cancelled') THEN now() ELSE ended_at END,
    winner = @winner, stop_reason = @stop_reason, updated_at = now()
WHERE id = @id
RETURNING *;

-- name: ExperimentUpdateEnds :exec
UPDATE experiments SET ends_at = @ends_at, updated_at = now() WHERE id = @id;

-- name: ExperimentUpdateRollout :exec
UPDATE experiments SET rollout_step = @rollout_step, rollout_step_at = now(), updated_at = now() WHERE id = @id;

-- name: ExperimentUpdateConflicts :exec
UPDATE experiments SET conflicts = conflicts + @conflicts WHERE id = @id;

-- name: ExposureInsertMany :many
-- First exposures of the phase (an arm of -1, outside the coverage, is not
-- recorded); a unit already exposed keeps its first arm. Returns each
-- unit's recorded arm.
WITH new AS (
    INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm)
    SELECT @experiment_id::uuid, @phase::int, u.unit_id, a.arm
    FROM unnest(@unit_ids::text[]) WITH ORDINALITY AS u(unit_id, i)
    JOIN unnest(@arms::int[]) WITH ORDINALITY AS a(arm, j) ON a.j = u.i
    WHERE a.arm >= 0
    ON CONFLICT (experiment_id, phase, unit_id) DO NOTHING
    RETURNING unit_id, arm
)
SELECT unit_id, arm FROM new
UNION ALL
SELECT e.unit_id, e.arm FROM experiment_exposures e
WHERE e.experiment_id = @experiment_id AND e.phase = @phase AND e.unit_id = ANY(@unit_ids::text[])
  AND NOT EXISTS (SELECT 1 FROM new n WHERE n.unit_id = e.unit_id);

-- name: ExposureListByUnits :many
-- Units' recorded arms, read again for those a concurrent first exposure
-- recorded after ExposureInsertMany's snapshot was taken.
SELECT unit_id, arm FROM experiment_exposures
WHERE experiment_id = @experiment_id AND phase = @phase AND unit_id = ANY(@unit_ids::text[]);

-- name: ExposureGetLatest :one
-- A unit's exposure in the newest phase it was assigned in.
SELECT * FROM experiment_exposures WHERE experiment_id = @experiment_id AND unit_id = @unit_id ORDER BY phase DESC LIMIT 1;

-- name: ExposureCountByArm :many
SELECT arm, count(*)::bigint AS units FROM experiment_exposures WHERE experiment_id = @experiment_id AND phase = @phase GROUP BY arm ORDER BY arm;

-- name: ExperimentListMetricSums :many
-- Per arm, each metric's per-unit values summed: the units with a value,
-- the sum and the sum of squares. A unit's value is its mean over its
-- feedback in the experiment (thumbs up 1, down 0; the rating; 1 for a
-- correction; the latency; each dimension's score).
WITH u AS (
    SELECT e.arm,
           avg(CASE f.feedback_type WHEN 'thumbs_up' THEN 1.0 WHEN 'thumbs_down' THEN 0.0 END)::float8 AS thumbs,
           avg(f.rating)::float8 AS rating,
           avg(CASE WHEN f.correction <> '' OR f.feedback_type = 'correction' THEN 1.0 ELSE 0.0 END)::float8 AS corrected,
           avg(f.latency_ms)::float8 AS latency,
           avg(f.dim_accuracy)::float8 AS accuracy, avg(f.dim_helpfulness)::float8 AS helpfulness,
           avg(f.dim_clarity)::float8 AS clarity, avg(f.dim_safety)::float8 AS safety
    FROM experiment_exposures e
    JOIN feedback f ON f.org_id = @org_id AND f.experiment_id = e.experiment_id AND f.end_user_id = e.unit_id
    WHERE e.experiment_id = @experiment_id AND e.phase = @phase
      AND (sqlc.narg('since')::timestamptz IS NULL OR f.created_at >= sqlc.narg('since'))
      AND (sqlc.narg('before')::timestamptz IS NULL OR f.created_at < sqlc.narg('before'))
    GROUP BY e.arm, e.unit_id
)
SELECT arm,
       count(thumbs)::float8 AS thumbs_n, coalesce(sum(thumbs), 0)::float8 AS thumbs_sum, coalesce(sum(thumbs * thumbs), 0)::float8 AS thumbs_ss,
       count(rating)::float8 AS rating_n, coalesce(sum(rating), 0)::float8 AS rating_sum, coalesce(sum(rating * rating), 0)::float8 AS rating_ss,
       count(corrected)::float8 AS corrected_n, coalesce(sum(corrected), 0)::float8 AS corrected_sum, coalesce(sum(corrected * corrected), 0)::float8 AS corrected_ss,
       count(latency)::float8 AS latency_n, coalesce(sum(latency), 0)::float8 AS latency_sum, coalesce(sum(latency * latency), 0)::float8 AS latency_ss,
       count(accuracy)::float8 AS accuracy_n, coalesce(sum(accuracy), 0)::float8 AS accuracy_sum, coalesce(sum(accuracy * accuracy), 0)::float8 AS accuracy_ss,
       count(helpfulness)::float8 AS helpfulness_n, coalesce(sum(helpfulness), 0)::float8 AS helpfulness_sum,
       coalesce(sum(helpfulness * helpfulness), 0)::float8 AS helpfulness_ss,
       count(clarity)::float8 AS clarity_n, coalesce(sum(clarity), 0)::float8 AS clarity_sum, coalesce(sum(clarity * clarity), 0)::float8 AS clarity_ss,
       count(safety)::float8 AS safety_n, coalesce(sum(safety), 0)::float8 AS safety_sum, coalesce(sum(safety * safety), 0)::float8 AS safety_ss
FROM u GROUP BY arm ORDER BY arm;

-- name: ExperimentListBuckets :many
-- The hours or days (unit, in UTC) the experiment's feedback arrived in,
-- for the cumulative chart.
SELECT DISTINCT date_trunc(@unit::text, f.created_at, 'UTC')::timestamptz AS bucket
FROM feedback f WHERE f.org_id = @org_id AND f.experiment_id = @experiment_id
  AND (sqlc.narg('since')::timestamptz IS NULL OR f.created_at >= sqlc.narg('since'))
ORDER BY bucket LIMIT 120;

-- name: ExperimentUpdateTraffic :one
-- New weights (in the arms) and coverage; a new phase when re-randomised.
UPDATE experiments SET coverage = @coverage, seed = @seed, phase = @phase,
    phase_started_at = CASE WHEN @phase::int <> phase THEN now() ELSE phase_started_at END,
    weights_changed = @weights_changed, updated_at = now()
WHERE id = @id
RETURNING *;
