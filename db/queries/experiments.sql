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

-- name: ExperimentConfigGet :many
-- What assigning a unit needs, one row per arm, read in one snapshot with
-- the count of changes made to it (see migration 00061): the experiment's
-- status, seed, phase and coverage, and each arm's weight and where it is
-- called, as ExperimentArmListServed answers them.
SELECT e.id, e.status, e.seed, e.phase, e.coverage, coalesce(e.phase_started_at, e.started_at) AS phase_started_at,
       (e.config_version + sum(a.config_version) OVER ())::bigint AS config_version,
       a.idx, a.name, a.weight, mv.version, mv.model_id, coalesce(d.served_name, '')::text AS served_name,
       coalesce(t.base_url, '')::text AS base_url,
       CASE WHEN d.id IS NULL THEN mv.kind = 'full' ELSE d.status = 'succeeded' AND d.unloaded_at IS NULL END::bool AS served
FROM experiments e
JOIN experiment_arms a ON a.experiment_id = e.id
JOIN model_versions mv ON mv.id = a.model_version_id
LEFT JOIN deployments d ON d.id = a.deployment_id
LEFT JOIN serving_targets t ON t.id = d.target_id
WHERE e.org_id = @org_id AND e.key = @key
ORDER BY a.idx;

-- name: ExperimentConfigGetForShare :exec
-- Holds an experiment's configuration still until the transaction ends
-- (what its arms call too: a change to it is counted on the arms), for a
-- caller whose copies kept going out of date.
SELECT e.id FROM experiments e JOIN experiment_arms a ON a.experiment_id = e.id
WHERE e.org_id = @org_id AND e.key = @key
FOR SHARE OF e, a;

-- name: ExperimentConfigGetVersion :one
-- The count of changes made to an experiment's configuration, to check a
-- copy of it read before.
SELECT e.id, (e.config_version + (SELECT sum(a.config_version) FROM experiment_arms a WHERE a.experiment_id = e.id))::bigint AS config_version
FROM experiments e WHERE e.org_id = @org_id AND e.key = @key;

-- name: ExposureInsertAssigned :one
-- Assignment in one statement: records the phase's first exposure of each
-- unit not yet exposed in the arm the caller chose for it (-1, outside the
-- coverage, is not recorded) and answers every unit's recorded arm. It
-- records only while the experiment's configuration is still at the
-- count of changes the arms were chosen under, and always answers the
-- count it is at: a caller whose copy is out of date reads it again and
-- repeats. A unit whose first exposure another caller recorded after this
-- statement's snapshot was taken is found by the insert, which waits for
-- it and answers its arm by rewriting the row as it is. The statement is
-- the function experiment_assign (migration 00062), planned once per
-- connection.
SELECT r.config_version::bigint AS config_version, r.unit_ids::text[] AS unit_ids, r.arms::int[] AS arms
FROM experiment_assign(@experiment_id::uuid, @org_id::uuid, @phase::int, @unit_ids::text[], @arms::int[], @config_version::bigint) r;

-- name: ExposureInsertAssignedOne :one
-- ExposureInsertAssigned for one unit, as a plain statement: a new unit is
-- recorded by one INSERT, and a known one answered by its first exposure's
-- arm; arm is -1 for a unit outside the coverage (an arm of -1 given) and
-- for one not recorded because the configuration is no longer at
-- config_version. Without arrays, PostgreSQL plans it once per
-- connection, and it skips what a batch needs (the units' order, their
-- duplicates, aggregating the answer), which cost a new unit as much
-- again as the INSERT.
-- The exposure goes to its phase's partition (migration 00180): the
-- phase's start is read from the experiment, and only while it is at the
-- phase given.
WITH cfg AS (
    SELECT (e.config_version + (SELECT sum(a.config_version) FROM experiment_arms a WHERE a.experiment_id = e.id))::bigint AS config_version,
           CASE WHEN e.phase = @phase::int THEN experiment_phase_start(e) END AS phase_started_at
    FROM experiments e WHERE e.id = @experiment_id AND e.org_id = @org_id
),
new AS (
    INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, phase_started_at)
    SELECT @experiment_id, @phase::int, @unit_id, @arm::int, cfg.phase_started_at FROM cfg
    WHERE cfg.config_version = @config_version::bigint AND @arm::int >= 0 AND cfg.phase_started_at IS NOT NULL
    ON CONFLICT (experiment_id, phase, unit_id, phase_started_at) DO NOTHING
    RETURNING arm
)
-- Only when nothing was inserted: the first exposure, by the primary key
-- whatever the plan kept, seeing one a concurrent call just committed
-- (experiment_exposure_arm, migrations 00171, 00173 and 00180).
SELECT cfg.config_version,
       coalesce((SELECT new.arm FROM new),
                experiment_exposure_arm(@experiment_id::uuid, @phase::int, @unit_id::text, cfg.phase_started_at), -1)::int AS arm
FROM cfg;

-- name: ExposureInsertReported :one
-- Exposures a client assigned itself and reports: each unit's earliest
-- one is its first exposure of the phase unless one is recorded already.
-- Answers how many were recorded.
WITH reported AS (
    SELECT DISTINCT ON (r.unit_id) r.unit_id, r.arm, r.at
    FROM (SELECT unnest(@unit_ids::text[]) AS unit_id, unnest(@arms::int[]) AS arm, unnest(@ats::timestamptz[]) AS at) r
    ORDER BY r.unit_id, r.at
),
-- Recorded in the phase's partition, while the experiment is at it
-- (migration 00180).
new AS (
    INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at)
    SELECT @experiment_id, @phase::int, r.unit_id, r.arm, r.at, experiment_phase_start(e)
    FROM reported r JOIN experiments e ON e.id = @experiment_id AND e.phase = @phase::int
    ON CONFLICT (experiment_id, phase, unit_id, phase_started_at) DO NOTHING
    RETURNING unit_id
),
-- A reported unit may have sent the experiment's answers before its
-- exposure was recorded: its values are folded in again (migration 00170).
marked AS (
    INSERT INTO experiment_sums_dirty (org_id, unit_id)
    SELECT e.org_id, new.unit_id FROM new JOIN experiments e ON e.id = @experiment_id
)
SELECT count(*)::bigint FROM new;

-- name: ExposureUpdateOtherArm :one
-- Marks the units reported in an arm other than their recorded one, each
-- once per phase, and counts the newly marked in the experiment's
-- conflicts (units seen in two arms). Answers how many were marked.
WITH marked AS (
    UPDATE experiment_exposures x SET seen_in_other_arm = true
    FROM (SELECT unnest(@unit_ids::text[]) AS unit_id, unnest(@arms::int[]) AS arm) r
    WHERE x.experiment_id = @experiment_id AND x.phase = @phase AND x.unit_id = r.unit_id AND x.arm <> r.arm
      AND NOT x.seen_in_other_arm
    RETURNING x.unit_id
),
counted AS (
    UPDATE experiments SET conflicts = conflicts + (SELECT count(*) FROM marked)
    WHERE id = @experiment_id AND EXISTS (SELECT 1 FROM marked)
)
SELECT count(*)::bigint FROM marked;

-- name: ExposureGetLatest :one
-- A unit's exposure in the newest phase it was assigned in, each phase's
-- looked up by the primary key (experiment_exposure_latest, migration
-- 00180).
SELECT * FROM experiment_exposure_latest(@experiment_id::uuid, @unit_id::text);

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
-- Each unit's values are joined to its covariates once (pp) and only then
-- split into a row per metric; the live scores are averaged per answer
-- once, for both windows, and joined rather than looked up per answer.
WITH x AS (
    SELECT e.arm, e.unit_id, e.first_seen FROM experiment_exposures e
    WHERE e.experiment_id = @experiment_id AND e.phase = @phase
),
-- Only the scores of the units' own feedback are averaged (both windows
-- join no other), so the organisation's other scores need not be read.
judged AS (
    SELECT s.feedback_id, avg(s.score) AS score
    FROM x JOIN feedback f ON f.org_id = @org_id AND f.end_user_id = x.unit_id AND f.end_user_id <> ''
    JOIN live_scores s ON s.feedback_id = f.id
    WHERE s.org_id = @org_id AND s.status = 'scored'
    GROUP BY s.feedback_id
),
post AS (
    SELECT x.arm, x.unit_id,
           avg(CASE f.feedback_type WHEN 'thumbs_up' THEN 1.0 WHEN 'thumbs_down' THEN 0.0 END)::float8 AS thumbs,
           avg(f.rating)::float8 AS rating,
           avg(CASE WHEN f.correction <> '' OR f.feedback_type = 'correction' THEN 1.0 ELSE 0.0 END)::float8 AS corrected,
           avg(f.latency_ms)::float8 AS latency,
           avg(f.dim_accuracy)::float8 AS accuracy, avg(f.dim_helpfulness)::float8 AS helpfulness,
           avg(f.dim_clarity)::float8 AS clarity, avg(f.dim_safety)::float8 AS safety,
           avg(j.score)::float8 AS judge
    FROM x JOIN feedback f ON f.org_id = @org_id AND f.experiment_id = @experiment_id AND f.end_user_id = x.unit_id
    LEFT JOIN judged j ON j.feedback_id = f.id
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
           avg(j.score)::float8 AS judge
    FROM x JOIN feedback f ON f.org_id = @org_id AND f.end_user_id = x.unit_id
        AND f.created_at >= x.first_seen - make_interval(days => @pre_days::int) AND f.created_at < x.first_seen
    LEFT JOIN judged j ON j.feedback_id = f.id
    WHERE @pre_days::int > 0
      -- The whole window of every unit, so that the organisation's feedback
      -- is read by its (org_id, created_at) index over that span only.
      AND f.created_at >= (SELECT min(first_seen) FROM x) - make_interval(days => @pre_days::int)
      AND f.created_at < (SELECT max(first_seen) FROM x)
    GROUP BY x.unit_id
),
pp AS (
    SELECT post.arm,
           post.thumbs AS y_thumbs, pre.thumbs AS x_thumbs,
           post.rating AS y_rating, pre.rating AS x_rating,
           post.corrected AS y_corrected, pre.corrected AS x_corrected,
           post.latency AS y_latency, pre.latency AS x_latency,
           post.accuracy AS y_accuracy, pre.accuracy AS x_accuracy,
           post.helpfulness AS y_helpfulness, pre.helpfulness AS x_helpfulness,
           post.clarity AS y_clarity, pre.clarity AS x_clarity,
           post.safety AS y_safety, pre.safety AS x_safety,
           post.judge AS y_judge, pre.judge AS x_judge
    FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id
),
v AS (
    SELECT arm, 'thumbs_up_rate'::text AS metric, y_thumbs AS y, x_thumbs AS x FROM pp WHERE y_thumbs IS NOT NULL
    UNION ALL
    SELECT arm, 'avg_rating'::text AS metric, y_rating AS y, x_rating AS x FROM pp WHERE y_rating IS NOT NULL
    UNION ALL
    SELECT arm, 'correction_rate'::text AS metric, y_corrected AS y, x_corrected AS x FROM pp WHERE y_corrected IS NOT NULL
    UNION ALL
    SELECT arm, 'latency'::text AS metric, y_latency AS y, x_latency AS x FROM pp WHERE y_latency IS NOT NULL
    UNION ALL
    SELECT arm, 'avg_accuracy'::text AS metric, y_accuracy AS y, x_accuracy AS x FROM pp WHERE y_accuracy IS NOT NULL
    UNION ALL
    SELECT arm, 'avg_helpfulness'::text AS metric, y_helpfulness AS y, x_helpfulness AS x FROM pp WHERE y_helpfulness IS NOT NULL
    UNION ALL
    SELECT arm, 'avg_clarity'::text AS metric, y_clarity AS y, x_clarity AS x FROM pp WHERE y_clarity IS NOT NULL
    UNION ALL
    SELECT arm, 'avg_safety'::text AS metric, y_safety AS y, x_safety AS x FROM pp WHERE y_safety IS NOT NULL
    UNION ALL
    SELECT arm, 'avg_judge_score'::text AS metric, y_judge AS y, x_judge AS x FROM pp WHERE y_judge IS NOT NULL
)
SELECT arm, metric::text AS metric, count(*)::float8 AS n, sum(y)::float8 AS sum, sum(y * y)::float8 AS sum_squares,
       count(x)::float8 AS pre_n, coalesce(sum(x), 0)::float8 AS pre_sum, coalesce(sum(x * x), 0)::float8 AS pre_sum_squares,
       coalesce(sum(x * y), 0)::float8 AS cross_sum
FROM v GROUP BY arm, metric ORDER BY arm, metric;

-- name: ExperimentListUnitSegments :many
-- Per unit of the phase, its arm, its segment and its value of each
-- metric (as ExperimentListMetricMoments computes them, without CUPED's
-- pre-exposure window), for results broken down by a dimension. A unit's
-- segment is read off its first feedback of the phase: the model it came
-- through, its source, whether it carries the tag @value ('yes' or 'no'),
-- or the value of the key @value of its context ('' when it has none).
WITH x AS (
    SELECT e.arm, e.unit_id FROM experiment_exposures e
    WHERE e.experiment_id = @experiment_id AND e.phase = @phase
),
f AS (
    SELECT f.id, f.end_user_id, f.created_at, f.feedback_type, f.rating, f.correction, f.latency_ms,
           f.dim_accuracy, f.dim_helpfulness, f.dim_clarity, f.dim_safety,
           CASE @dimension::text
               WHEN 'model' THEN f.model
               WHEN 'source' THEN f.source::text
               WHEN 'tag' THEN CASE WHEN @value::text = ANY (f.tags) THEN 'yes' ELSE 'no' END
               ELSE coalesce(f.context ->> @value::text, '')
           END AS segment
    FROM feedback f
    WHERE f.org_id = @org_id AND f.experiment_id = @experiment_id
      AND (sqlc.narg('since')::timestamptz IS NULL OR f.created_at >= sqlc.narg('since'))
),
judged AS (
    SELECT s.feedback_id, avg(s.score) AS score FROM live_scores s
    WHERE s.org_id = @org_id AND s.status = 'scored'
    GROUP BY s.feedback_id
)
SELECT x.arm,
       (array_agg(f.segment ORDER BY f.created_at, f.id))[1]::text AS segment,
       -- NaN stands for a metric the unit has no value of (an average of
       -- finite values never is NaN).
       coalesce(avg(CASE f.feedback_type WHEN 'thumbs_up' THEN 1.0 WHEN 'thumbs_down' THEN 0.0 END), 'NaN')::float8 AS thumbs,
       coalesce(avg(f.rating), 'NaN')::float8 AS rating,
       coalesce(avg(CASE WHEN f.correction <> '' OR f.feedback_type = 'correction' THEN 1.0 ELSE 0.0 END), 'NaN')::float8 AS corrected,
       coalesce(avg(f.latency_ms), 'NaN')::float8 AS latency,
       coalesce(avg(f.dim_accuracy), 'NaN')::float8 AS accuracy, coalesce(avg(f.dim_helpfulness), 'NaN')::float8 AS helpfulness,
       coalesce(avg(f.dim_clarity), 'NaN')::float8 AS clarity, coalesce(avg(f.dim_safety), 'NaN')::float8 AS safety,
       coalesce(avg(j.score), 'NaN')::float8 AS judge
FROM x JOIN f ON f.end_user_id = x.unit_id
LEFT JOIN judged j ON j.feedback_id = f.id
GROUP BY x.arm, x.unit_id;

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
-- for the cumulative chart: each found from the one before by the first
-- feedback after it, read from the organisation's (org_id, created_at)
-- index, so that an experiment's millions of answers are not all read to
-- name a few buckets.
WITH RECURSIVE b AS (
    SELECT date_trunc(@unit::text, (
        SELECT f.created_at FROM feedback f WHERE f.org_id = @org_id AND f.experiment_id = @experiment_id
          AND (sqlc.narg('since')::timestamptz IS NULL OR f.created_at >= sqlc.narg('since'))
        ORDER BY f.created_at LIMIT 1), 'UTC') AS bucket, 1 AS n
    UNION ALL
    SELECT date_trunc(@unit::text, (
        SELECT f.created_at FROM feedback f WHERE f.org_id = @org_id AND f.experiment_id = @experiment_id
          -- In hours, so that a session's time zone cannot make a UTC day 23 hours.
          AND f.created_at >= b.bucket + CASE @unit::text WHEN 'day' THEN interval '24 hours' ELSE interval '1 hour' END
        ORDER BY f.created_at LIMIT 1), 'UTC'), b.n + 1
    FROM b WHERE b.bucket IS NOT NULL AND b.n < 120
)
SELECT bucket::timestamptz AS bucket FROM b WHERE bucket IS NOT NULL ORDER BY bucket;

-- name: ExperimentUpdateTraffic :one
-- New weights (in the arms) and coverage; a new phase when re-randomised.
UPDATE experiments SET coverage = @coverage, seed = @seed, phase = @phase,
    phase_started_at = CASE WHEN @phase::int <> phase THEN now() ELSE phase_started_at END,
    weights_changed = @weights_changed, updated_at = now()
WHERE id = @id
RETURNING *;

-- name: ExperimentArmUpdateReloaded :exec
-- Calls the arms of running or paused experiments that were called at a
-- deployment its target stopped listing at the deployment that reloaded
-- it.
UPDATE experiment_arms a SET deployment_id = @reload_id
FROM experiments e
WHERE e.id = a.experiment_id AND e.org_id = @org_id AND e.status IN ('running', 'paused') AND a.deployment_id = @deployment_id;

-- name: ExperimentSumGetLock :exec
-- Waits for any other fold of an organisation's per-unit values
-- (migration 00170) and holds it off until the transaction ends: folds of
-- one organisation run one at a time, so the end users each takes from
-- experiment_sums_dirty are folded in the order they were taken.
SELECT pg_advisory_xact_lock(hashtextextended(concat('experiment_sums:', @org_id::uuid), 0));

-- name: ExperimentSumListByOrg :many
-- The experiments of an organisation whose per-unit values are kept, with
-- what they were made for.
SELECT s.experiment_id, s.phase, s.since, s.pre_days, e.phase AS current_phase, e.phase_started_at AS current_since, e.cuped_days AS current_pre_days
FROM experiment_sums s JOIN experiments e ON e.id = s.experiment_id
WHERE s.org_id = @org_id
ORDER BY s.experiment_id;

-- name: ExperimentSumDeleteDirty :many
-- Takes the end users of an organisation whose values may have changed.
WITH taken AS (
    DELETE FROM experiment_sums_dirty WHERE org_id = @org_id RETURNING unit_id
)
SELECT DISTINCT unit_id FROM taken;

-- name: ExperimentSumListDirtyOrgs :many
-- The organisations with end users to fold in, a few at a time.
SELECT DISTINCT org_id FROM experiment_sums_dirty LIMIT @row_limit;

-- name: ExperimentSumInsertOrUpdate :exec
-- Records what an experiment's per-unit values are made for, dropping the
-- ones made before.
WITH gone AS (
    DELETE FROM experiment_unit_sums WHERE experiment_id = @experiment_id
)
INSERT INTO experiment_sums (experiment_id, org_id, phase, since, pre_days)
VALUES (@experiment_id, @org_id, @phase, sqlc.narg('since'), @pre_days)
ON CONFLICT (experiment_id) DO UPDATE SET phase = excluded.phase, since = excluded.since, pre_days = excluded.pre_days, built_at = now();

-- name: ExperimentSumDelete :exec
-- Drops an experiment's per-unit values (its rows go with it), to be
-- made again on its next read.
DELETE FROM experiment_sums WHERE experiment_id = @experiment_id AND org_id = @org_id;

-- name: ExperimentUnitSumInsertAll :exec
-- Every unit's values of an experiment's phase, as ExperimentListMetricMoments
-- computes them before it sums them per arm (see there), and its safety
-- incidents as ExperimentCountIncidents counts them: hash joins over the
-- experiment's answers, once.
WITH x AS (
    SELECT e.arm, e.unit_id, e.first_seen FROM experiment_exposures e
    WHERE e.experiment_id = @experiment_id AND e.phase = @phase
),
judged AS (
    SELECT s.feedback_id, avg(s.score) AS score
    FROM x JOIN feedback f ON f.org_id = @org_id AND f.end_user_id = x.unit_id AND f.end_user_id <> ''
    JOIN live_scores s ON s.feedback_id = f.id
    WHERE s.org_id = @org_id AND s.status = 'scored'
    GROUP BY s.feedback_id
),
flagged AS (
    SELECT DISTINCT s.feedback_id FROM live_scores s
    JOIN feedback f ON f.id = s.feedback_id AND f.org_id = @org_id AND f.experiment_id = @experiment_id
    WHERE s.status = 'scored' AND s.safety_flag
),
post AS (
    SELECT x.arm, x.unit_id,
           avg(CASE f.feedback_type WHEN 'thumbs_up' THEN 1.0 WHEN 'thumbs_down' THEN 0.0 END)::float8 AS thumbs,
           avg(f.rating)::float8 AS rating,
           avg(CASE WHEN f.correction <> '' OR f.feedback_type = 'correction' THEN 1.0 ELSE 0.0 END)::float8 AS corrected,
           avg(f.latency_ms)::float8 AS latency,
           avg(f.dim_accuracy)::float8 AS accuracy, avg(f.dim_helpfulness)::float8 AS helpfulness,
           avg(f.dim_clarity)::float8 AS clarity, avg(f.dim_safety)::float8 AS safety,
           avg(j.score)::float8 AS judge,
           count(g.feedback_id)::bigint AS incidents
    FROM x JOIN feedback f ON f.org_id = @org_id AND f.experiment_id = @experiment_id AND f.end_user_id = x.unit_id
    LEFT JOIN judged j ON j.feedback_id = f.id
    LEFT JOIN flagged g ON g.feedback_id = f.id
    WHERE (sqlc.narg('since')::timestamptz IS NULL OR f.created_at >= sqlc.narg('since'))
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
           avg(j.score)::float8 AS judge
    FROM x JOIN feedback f ON f.org_id = @org_id AND f.end_user_id = x.unit_id
        AND f.created_at >= x.first_seen - make_interval(days => @pre_days::int) AND f.created_at < x.first_seen
    LEFT JOIN judged j ON j.feedback_id = f.id
    WHERE @pre_days::int > 0
      AND f.created_at >= (SELECT min(first_seen) FROM x) - make_interval(days => @pre_days::int)
      AND f.created_at < (SELECT max(first_seen) FROM x)
    GROUP BY x.unit_id
)
INSERT INTO experiment_unit_sums (experiment_id, phase, unit_id, arm,
    y_thumbs, x_thumbs, y_rating, x_rating, y_corrected, x_corrected, y_latency, x_latency, y_accuracy, x_accuracy,
    y_helpfulness, x_helpfulness, y_clarity, x_clarity, y_safety, x_safety, y_judge, x_judge, incidents)
SELECT @experiment_id::uuid, @phase::int, post.unit_id, post.arm,
       post.thumbs, CASE WHEN post.thumbs IS NOT NULL THEN pre.thumbs END, post.rating, CASE WHEN post.rating IS NOT NULL THEN pre.rating END,
       post.corrected, CASE WHEN post.corrected IS NOT NULL THEN pre.corrected END, post.latency, CASE WHEN post.latency IS NOT NULL THEN pre.latency END,
       post.accuracy, CASE WHEN post.accuracy IS NOT NULL THEN pre.accuracy END, post.helpfulness, CASE WHEN post.helpfulness IS NOT NULL THEN pre.helpfulness END,
       post.clarity, CASE WHEN post.clarity IS NOT NULL THEN pre.clarity END, post.safety, CASE WHEN post.safety IS NOT NULL THEN pre.safety END,
       post.judge, CASE WHEN post.judge IS NOT NULL THEN pre.judge END, post.incidents
FROM post LEFT JOIN pre ON pre.unit_id = post.unit_id
-- In the primary key's order: the index is written in order, and a read
-- of the phase's units reads the table in order.
ORDER BY post.unit_id;

-- name: ExperimentUnitSumDeleteUnits :exec
DELETE FROM experiment_unit_sums WHERE experiment_id = @experiment_id AND phase = @phase AND unit_id = ANY(@unit_ids::text[]);

-- name: ExperimentUnitSumInsertUnits :exec
-- ExperimentUnitSumInsertAll for the units of a few end users, each read
-- by its own lookups (the end user's answers by feedback_org_end_user_idx,
-- an answer's scores by live_scores_feedback), so that folding in a few
-- reads a few rows whatever the experiment's size.
INSERT INTO experiment_unit_sums (experiment_id, phase, unit_id, arm,
    y_thumbs, x_thumbs, y_rating, x_rating, y_corrected, x_corrected, y_latency, x_latency, y_accuracy, x_accuracy,
    y_helpfulness, x_helpfulness, y_clarity, x_clarity, y_safety, x_safety, y_judge, x_judge, incidents)
SELECT @experiment_id::uuid, @phase::int, x.unit_id, x.arm,
       post.thumbs, CASE WHEN post.thumbs IS NOT NULL THEN pre.thumbs END, post.rating, CASE WHEN post.rating IS NOT NULL THEN pre.rating END,
       post.corrected, CASE WHEN post.corrected IS NOT NULL THEN pre.corrected END, post.latency, CASE WHEN post.latency IS NOT NULL THEN pre.latency END,
       post.accuracy, CASE WHEN post.accuracy IS NOT NULL THEN pre.accuracy END, post.helpfulness, CASE WHEN post.helpfulness IS NOT NULL THEN pre.helpfulness END,
       post.clarity, CASE WHEN post.clarity IS NOT NULL THEN pre.clarity END, post.safety, CASE WHEN post.safety IS NOT NULL THEN pre.safety END,
       post.judge, CASE WHEN post.judge IS NOT NULL THEN pre.judge END, post.incidents
FROM experiment_exposures x
CROSS JOIN LATERAL (
    SELECT count(*) AS answers,
           avg(CASE f.feedback_type WHEN 'thumbs_up' THEN 1.0 WHEN 'thumbs_down' THEN 0.0 END)::float8 AS thumbs,
           avg(f.rating)::float8 AS rating,
           avg(CASE WHEN f.correction <> '' OR f.feedback_type = 'correction' THEN 1.0 ELSE 0.0 END)::float8 AS corrected,
           avg(f.latency_ms)::float8 AS latency,
           avg(f.dim_accuracy)::float8 AS accuracy, avg(f.dim_helpfulness)::float8 AS helpfulness,
           avg(f.dim_clarity)::float8 AS clarity, avg(f.dim_safety)::float8 AS safety,
           avg(j.score)::float8 AS judge,
           count(*) FILTER (WHERE j.flagged)::bigint AS incidents
    FROM feedback f
    CROSS JOIN LATERAL (
        SELECT avg(s.score) FILTER (WHERE s.org_id = @org_id) AS score, coalesce(bool_or(s.safety_flag), false) AS flagged
        FROM live_scores s WHERE s.feedback_id = f.id AND s.status = 'scored'
    ) j
    WHERE f.org_id = @org_id AND f.end_user_id = x.unit_id AND f.end_user_id <> '' AND f.experiment_id = @experiment_id
      AND (sqlc.narg('since')::timestamptz IS NULL OR f.created_at >= sqlc.narg('since'))
) post
CROSS JOIN LATERAL (
    SELECT avg(CASE f.feedback_type WHEN 'thumbs_up' THEN 1.0 WHEN 'thumbs_down' THEN 0.0 END)::float8 AS thumbs,
           avg(f.rating)::float8 AS rating,
           avg(CASE WHEN f.correction <> '' OR f.feedback_type = 'correction' THEN 1.0 ELSE 0.0 END)::float8 AS corrected,
           avg(f.latency_ms)::float8 AS latency,
           avg(f.dim_accuracy)::float8 AS accuracy, avg(f.dim_helpfulness)::float8 AS helpfulness,
           avg(f.dim_clarity)::float8 AS clarity, avg(f.dim_safety)::float8 AS safety,
           avg(j.score)::float8 AS judge
    FROM feedback f
    CROSS JOIN LATERAL (
        SELECT avg(s.score) AS score FROM live_scores s WHERE s.feedback_id = f.id AND s.org_id = @org_id AND s.status = 'scored'
    ) j
    WHERE @pre_days::int > 0 AND f.org_id = @org_id AND f.end_user_id = x.unit_id AND f.end_user_id <> ''
      AND f.created_at >= x.first_seen - make_interval(days => @pre_days::int) AND f.created_at < x.first_seen
) pre
WHERE x.experiment_id = @experiment_id AND x.phase = @phase AND x.unit_id = ANY(@unit_ids::text[]) AND post.answers > 0;

-- name: ExperimentUnitSumListArms :many
-- Per arm, what ExperimentListMetricMoments and ExperimentCountIncidents
-- answer, summed over the units' kept values: for each metric the units
-- with a value (n), Σy, Σy², and of those with a pre-exposure value x
-- (kept only beside a value), their count, Σx, Σx² and Σxy; and the
-- arm's incidents. One pass over the
-- phase's units, none over its answers.
SELECT arm,
    count(y_thumbs)::float8 AS thumbs_n, coalesce(sum(y_thumbs), 0)::float8 AS thumbs_sum, coalesce(sum(y_thumbs * y_thumbs), 0)::float8 AS thumbs_sq,
    count(x_thumbs)::float8 AS thumbs_pre_n, coalesce(sum(x_thumbs), 0)::float8 AS thumbs_pre_sum,
    coalesce(sum(x_thumbs * x_thumbs), 0)::float8 AS thumbs_pre_sq, coalesce(sum(x_thumbs * y_thumbs), 0)::float8 AS thumbs_cross,
    count(y_rating)::float8 AS rating_n, coalesce(sum(y_rating), 0)::float8 AS rating_sum, coalesce(sum(y_rating * y_rating), 0)::float8 AS rating_sq,
    count(x_rating)::float8 AS rating_pre_n, coalesce(sum(x_rating), 0)::float8 AS rating_pre_sum,
    coalesce(sum(x_rating * x_rating), 0)::float8 AS rating_pre_sq, coalesce(sum(x_rating * y_rating), 0)::float8 AS rating_cross,
    count(y_corrected)::float8 AS corrected_n, coalesce(sum(y_corrected), 0)::float8 AS corrected_sum, coalesce(sum(y_corrected * y_corrected), 0)::float8 AS corrected_sq,
    count(x_corrected)::float8 AS corrected_pre_n, coalesce(sum(x_corrected), 0)::float8 AS corrected_pre_sum,
    coalesce(sum(x_corrected * x_corrected), 0)::float8 AS corrected_pre_sq, coalesce(sum(x_corrected * y_corrected), 0)::float8 AS corrected_cross,
    count(y_latency)::float8 AS latency_n, coalesce(sum(y_latency), 0)::float8 AS latency_sum, coalesce(sum(y_latency * y_latency), 0)::float8 AS latency_sq,
    count(x_latency)::float8 AS latency_pre_n, coalesce(sum(x_latency), 0)::float8 AS latency_pre_sum,
    coalesce(sum(x_latency * x_latency), 0)::float8 AS latency_pre_sq, coalesce(sum(x_latency * y_latency), 0)::float8 AS latency_cross,
    count(y_accuracy)::float8 AS accuracy_n, coalesce(sum(y_accuracy), 0)::float8 AS accuracy_sum, coalesce(sum(y_accuracy * y_accuracy), 0)::float8 AS accuracy_sq,
    count(x_accuracy)::float8 AS accuracy_pre_n, coalesce(sum(x_accuracy), 0)::float8 AS accuracy_pre_sum,
    coalesce(sum(x_accuracy * x_accuracy), 0)::float8 AS accuracy_pre_sq, coalesce(sum(x_accuracy * y_accuracy), 0)::float8 AS accuracy_cross,
    count(y_helpfulness)::float8 AS helpfulness_n, coalesce(sum(y_helpfulness), 0)::float8 AS helpfulness_sum, coalesce(sum(y_helpfulness * y_helpfulness), 0)::float8 AS helpfulness_sq,
    count(x_helpfulness)::float8 AS helpfulness_pre_n, coalesce(sum(x_helpfulness), 0)::float8 AS helpfulness_pre_sum,
    coalesce(sum(x_helpfulness * x_helpfulness), 0)::float8 AS helpfulness_pre_sq, coalesce(sum(x_helpfulness * y_helpfulness), 0)::float8 AS helpfulness_cross,
    count(y_clarity)::float8 AS clarity_n, coalesce(sum(y_clarity), 0)::float8 AS clarity_sum, coalesce(sum(y_clarity * y_clarity), 0)::float8 AS clarity_sq,
    count(x_clarity)::float8 AS clarity_pre_n, coalesce(sum(x_clarity), 0)::float8 AS clarity_pre_sum,
    coalesce(sum(x_clarity * x_clarity), 0)::float8 AS clarity_pre_sq, coalesce(sum(x_clarity * y_clarity), 0)::float8 AS clarity_cross,
    count(y_safety)::float8 AS safety_n, coalesce(sum(y_safety), 0)::float8 AS safety_sum, coalesce(sum(y_safety * y_safety), 0)::float8 AS safety_sq,
    count(x_safety)::float8 AS safety_pre_n, coalesce(sum(x_safety), 0)::float8 AS safety_pre_sum,
    coalesce(sum(x_safety * x_safety), 0)::float8 AS safety_pre_sq, coalesce(sum(x_safety * y_safety), 0)::float8 AS safety_cross,
    count(y_judge)::float8 AS judge_n, coalesce(sum(y_judge), 0)::float8 AS judge_sum, coalesce(sum(y_judge * y_judge), 0)::float8 AS judge_sq,
    count(x_judge)::float8 AS judge_pre_n, coalesce(sum(x_judge), 0)::float8 AS judge_pre_sum,
    coalesce(sum(x_judge * x_judge), 0)::float8 AS judge_pre_sq, coalesce(sum(x_judge * y_judge), 0)::float8 AS judge_cross,
    coalesce(sum(incidents), 0)::bigint AS incidents
FROM experiment_unit_sums
WHERE experiment_id = @experiment_id AND phase = @phase
GROUP BY arm ORDER BY arm;
