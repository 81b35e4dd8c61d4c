-- A/B experiments, their arms and exposures, and feedback by arm.

-- name: ExperimentInsert :one
INSERT INTO experiments (org_id, key, name, registered_model_id, seed, coverage, metrics, guardrails, min_sample_per_arm,
    rollout_steps, rollout_hold, rollout_min_units, starts_at, ends_at, created_by_label)
VALUES (@org_id, @key, @name, @registered_model_id, @seed, @coverage, @metrics, @guardrails, @min_sample_per_arm,
    @rollout_steps, @rollout_hold, @rollout_min_units, sqlc.narg('starts_at'), sqlc.narg('ends_at'), @created_by_label)
RETURNING *;

-- name: ExperimentKeyGetForUpdate :exec
-- Holds the organisation's experiment keys still until the transaction
-- ends, so that a key derived from a name is chosen once. An advisory
-- lock: the key has no row yet.
SELECT pg_advisory_xact_lock(4, hashtext(concat(@org_id::uuid)));

-- name: ExperimentListKeysLike :many
-- The keys a key derived from a name could clash with: the key itself and
-- its numbered forms (key-2, key-3, ...).
SELECT key FROM experiments WHERE org_id = @org_id AND (key = @key OR starts_with(key, @key || '-'));

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

-- name: ExperimentListMetricMoments :many
-- Per arm and metric, the sums the statistics engine reads: the units with
-- a value (n), the sum and the sum of squares of their values and, for
-- CUPED, of their pre-exposure values x: Σx, Σx² and Σxy, with pre_n the
-- units that had one (the others count with x = 0). A unit's value is its
-- mean over its feedback in the experiment (thumbs up 1, down 0; the
-- rating; 1 for a correction; the latency; each dimension's score; the
-- live scorer's score); its pre-exposure value is the same mean over the
-- feedback it sent in the pre_days before its first exposure, in any
-- experiment or none (none when pre_days is 0).
WITH x AS (
    SELECT e.arm, e.unit_id, e.first_seen FROM experiment_exposures e
    WHERE e.experiment_id = @experiment_id AND e.phase = @phase
),
post AS (
    SELECT x.arm, x.unit_id,
           avg(CASE f.feedback_type WHEN 'thumbs_up' THEN 1.0 WHEN 'thumbs_down' THEN 0.0 END)::float8 AS thumbs,
           avg(f.rating)::float8 AS rating,
           avg(CASE WHEN f.correction <> '' OR f.feedback_type = 'correction' THEN 1.0 ELSE 0.0 END)::float8 AS corrected,
           avg(f.latency_ms)::float8 AS latency,
           avg(f.dim_accuracy)::float8 AS accuracy, avg(f.dim_helpfulness)::float8 AS helpfulness,
           avg(f.dim_clarity)::float8 AS clarity, avg(f.dim_safety)::float8 AS safety,
           avg((SELECT avg(s.score) FROM live_scores s WHERE s.feedback_id = f.id AND s.status = 'scored'))::float8 AS judge
    FROM x JOIN feedback f ON f.org_id = @org_id AND f.experiment_id = @experiment_id AND f.end_user_id = x.unit_id
    WHERE (sqlc.narg('since')::timestamptz IS NULL OR f.created_at >= sqlc.narg('since'))
      AND (sqlc.narg('before')::timestamptz IS NULL OR f.created_at < sqlc.narg('before'))
    GROUP BY x.arm, x.unit_id
),
pre AS (
    SELECT x.unit_id,
           avg(CASE f.feedback_type WHEN 'thumbs_up' THEN 1.0 WHEN 'thumbs_down' THEN 0.0 END)::float8 AS thumbs,
           avg(f.rating)::float8 AS rating,
           avg(CASE WHEN f.correction <> '' OR f.feedback_type = 'correction' THEN 1.0 ELSE 0.0 END)::float8 AS corrected,
           avg(f.latency_ms)::float8 AS latency,
           avg(f.dim_accuracy)::float8 AS accuracy, avg(f.dim_helpfulness)::float8 AS helpfulness,
           avg(f.dim_clarity)::float8 AS clarity, avg(f.dim_safety)::float8 AS safety,
           avg((SELECT avg(s.score) FROM live_scores s WHERE s.feedback_id = f.id AND s.status = 'scored'))::float8 AS judge
    FROM x JOIN feedback f ON f.org_id = @org_id AND f.end_user_id = x.unit_id
        AND f.created_at >= x.first_seen - make_interval(days => @pre_days::int) AND f.created_at < x.first_seen
    WHERE @pre_days::int > 0
      -- The whole window of every unit, so that the organisation's feedback
      -- is read by its (org_id, created_at) index over that span only.
      AND f.created_at >= (SELECT min(first_seen) FROM x) - make_interval(days => @pre_days::int)
      AND f.created_at < (SELECT max(first_seen) FROM x)
    GROUP BY x.unit_id
),
v AS (
    SELECT post.arm, 'thumbs_up_rate'::text AS metric, post.thumbs AS y, pre.thumbs AS x FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id WHERE post.thumbs IS NOT NULL
    UNION ALL
    SELECT post.arm, 'avg_rating'::text AS metric, post.rating AS y, pre.rating AS x FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id WHERE post.rating IS NOT NULL
    UNION ALL
    SELECT post.arm, 'correction_rate'::text AS metric, post.corrected AS y, pre.corrected AS x FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id WHERE post.corrected IS NOT NULL
    UNION ALL
    SELECT post.arm, 'latency'::text AS metric, post.latency AS y, pre.latency AS x FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id WHERE post.latency IS NOT NULL
    UNION ALL
    SELECT post.arm, 'avg_accuracy'::text AS metric, post.accuracy AS y, pre.accuracy AS x FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id WHERE post.accuracy IS NOT NULL
    UNION ALL
    SELECT post.arm, 'avg_helpfulness'::text AS metric, post.helpfulness AS y, pre.helpfulness AS x FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id WHERE post.helpfulness IS NOT NULL
    UNION ALL
    SELECT post.arm, 'avg_clarity'::text AS metric, post.clarity AS y, pre.clarity AS x FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id WHERE post.clarity IS NOT NULL
    UNION ALL
    SELECT post.arm, 'avg_safety'::text AS metric, post.safety AS y, pre.safety AS x FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id WHERE post.safety IS NOT NULL
    UNION ALL
    SELECT post.arm, 'avg_judge_score'::text AS metric, post.judge AS y, pre.judge AS x FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id WHERE post.judge IS NOT NULL
)
SELECT arm, metric::text AS metric, count(*)::float8 AS n, sum(y)::float8 AS sum, sum(y * y)::float8 AS sum_squares,
       count(x)::float8 AS pre_n, coalesce(sum(x), 0)::float8 AS pre_sum, coalesce(sum(x * x), 0)::float8 AS pre_sum_squares,
       coalesce(sum(x * y), 0)::float8 AS cross_sum
FROM v GROUP BY arm, metric ORDER BY arm, metric;

-- name: ExperimentCountIncidents :many
-- Per arm, the answers in the phase that the live scorer flagged as
-- unsafe: the experiment's safety incidents.
SELECT x.arm, count(DISTINCT f.id)::bigint AS incidents
FROM experiment_exposures x
JOIN feedback f ON f.org_id = @org_id AND f.experiment_id = x.experiment_id AND f.end_user_id = x.unit_id
JOIN live_scores s ON s.feedback_id = f.id AND s.status = 'scored' AND s.safety_flag
WHERE x.experiment_id = @experiment_id AND x.phase = @phase
  AND (sqlc.narg('since')::timestamptz IS NULL OR f.created_at >= sqlc.narg('since'))
GROUP BY x.arm ORDER BY x.arm;

-- name: ExperimentUpdateAnalysis :exec
-- How the experiment is analysed (see migration 00052).
UPDATE experiments SET engine = @engine, cuped_days = @cuped_days, goal_correction = @goal_correction,
    guardrail_correction = @guardrail_correction, criteria = @criteria, chance_to_win = @chance_to_win,
    max_risk = @max_risk, updated_at = now()
WHERE id = @id;

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
