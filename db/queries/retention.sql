-- Time partitions and retention (migrations 00140, 00141).

-- name: PartitionListMaintained :many
-- Creates the coming months' partitions, splits the DEFAULT partitions'
-- months out and drops emptied months before empty_before (emptied: the
-- months retention removed rows from, whatever the statistics say yet).
SELECT partition_name::text AS partition_name, action::text AS action
FROM feedback_partitions_maintain(@ahead::int, @empty_before::timestamptz, @emptied::timestamptz[]);

-- name: OrgListRetention :many
-- The organisations that keep feedback for a limited time.
SELECT id, retention_days::int AS retention_days FROM organizations WHERE retention_days IS NOT NULL ORDER BY id;

-- name: OrgUpdateRetention :exec
UPDATE organizations SET retention_days = sqlc.narg('retention_days') WHERE id = @id;

-- name: FeedbackGetOldest :one
-- When the organisation's oldest feedback was given (now without any).
SELECT coalesce(min(created_at), now())::timestamptz AS oldest FROM feedback WHERE org_id = @org_id;

-- name: FeedbackKeyDeleteRange :execrows
-- The keys of the organisation's feedback given in [from, to): their
-- delete cascades to every row that references the feedback, as the
-- feedback's own delete did. The range lies in one month, so one
-- partition is read.
DELETE FROM feedback_keys k USING feedback f
WHERE f.org_id = @org_id AND f.created_at >= @from_at AND f.created_at < @to_at AND k.id = f.id;

-- name: FeedbackDeleteRange :execrows
-- The organisation's feedback given in [from, to), after its keys.
DELETE FROM feedback WHERE org_id = @org_id AND created_at >= @from_at AND created_at < @to_at;

-- name: PartitionInsertMonths :exec
-- The months' partitions of feedback and live scores, made before rows of
-- those months are written: a row of a month without its partition lands
-- in DEFAULT, and moving it out later hides it from a read planned while
-- the move commits. Making one waits for every read of DEFAULT then under
-- way, and holds off the reads after it meanwhile: it gives up after two
-- seconds (lock_timeout, for this statement), leaving the rows to DEFAULT.
WITH limits AS MATERIALIZED (SELECT set_config('lock_timeout', '2s', true) AS lock_timeout)
SELECT month_partition_ensure('feedback', 'created_at', m), month_partition_ensure('live_scores', 'feedback_at', m)
FROM limits, unnest(@months::timestamptz[]) m;

-- name: ExposureDeleteExpired :many
-- The organisation's experiment exposures first seen before before_at.
-- Only the partitions of phases that began before it are read (migration
-- 00180), each experiment's rows by its primary key. The end users' kept
-- per-unit values are folded again (migration 00170), which drops the
-- units left without an exposure. Answers the rows removed per month of
-- their phase's start (the month of their partition).
WITH gone AS (
    DELETE FROM experiment_exposures x USING experiments e
    WHERE e.org_id = @org_id AND x.experiment_id = e.id AND x.phase_started_at < @before_at AND x.first_seen < @before_at
    RETURNING x.unit_id, x.phase_started_at
),
marked AS (
    INSERT INTO experiment_sums_dirty (org_id, unit_id) SELECT DISTINCT @org_id::uuid, unit_id FROM gone
)
SELECT to_char(date_trunc('month', phase_started_at AT TIME ZONE 'UTC'), 'YYYY-MM')::text AS month, count(*)::bigint AS rows
FROM gone GROUP BY 1 ORDER BY 1;
