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
