-- name: RiverJobCountByKindState :many
-- For /metrics: River's jobs are shared by all organisations, so these counts
-- are never shown on an organisation's pages.
SELECT kind, state::text AS state, count(*) AS count FROM river_job GROUP BY kind, state ORDER BY kind, state;

-- name: RiverMigrationGetVersion :one
-- /readyz asks this: it fails unless River's tables are in place.
SELECT coalesce(max(version), 0)::bigint FROM river_migration;

-- name: JobHeartbeatInsert :exec
-- A worker starts an attempt of a job that beats. A row an earlier attempt
-- left is taken over.
INSERT INTO job_heartbeats (job_id, attempt) VALUES (@job_id, @attempt)
ON CONFLICT (job_id) DO UPDATE SET attempt = EXCLUDED.attempt, beat_at = now();

-- name: JobHeartbeatUpdate :execrows
-- No row updated: the sweep gave this attempt up (another may be running
-- the job now), and its worker must stop.
UPDATE job_heartbeats SET beat_at = now() WHERE job_id = @job_id AND attempt = @attempt;

-- name: JobHeartbeatDelete :exec
DELETE FROM job_heartbeats WHERE job_id = @job_id AND attempt = @attempt;

-- name: JobHeartbeatDeleteOrphans :exec
-- Rows whose attempt no longer runs: the worker could not clear its row as
-- it finished.
DELETE FROM job_heartbeats h
WHERE NOT EXISTS (SELECT 1 FROM river_job j WHERE j.id = h.job_id AND j.state = 'running' AND j.attempt = h.attempt);

-- name: JobUpdateStale :many
-- Running jobs of the kinds that beat whose current attempt has not beaten
-- for stale_seconds (or never beat, and started that long ago): their
-- worker is gone. Each goes back in the queue at once, or is discarded when
-- out of attempts, as River's own rescuer would do after the job's timeout;
-- the attempt's heartbeat row goes, so a worker that was only cut off from
-- the database stops at its next beat. job_id, when set, takes that job
-- alone (a run an admin resumes).
WITH stale AS (
    SELECT j.id FROM river_job j
    LEFT JOIN job_heartbeats h ON h.job_id = j.id AND h.attempt = j.attempt
    WHERE j.state = 'running' AND j.kind = ANY(@kinds::text[])
      AND coalesce(h.beat_at, j.attempted_at) < now() - make_interval(secs => @stale_seconds::float8)
      AND (sqlc.narg('job_id')::bigint IS NULL OR j.id = sqlc.narg('job_id'))
    FOR UPDATE OF j SKIP LOCKED
), gone AS (
    DELETE FROM job_heartbeats h USING stale WHERE h.job_id = stale.id
)
UPDATE river_job j SET
    state = (CASE WHEN j.attempt < j.max_attempts THEN 'available' ELSE 'discarded' END)::river_job_state,
    scheduled_at = now(),
    finalized_at = CASE WHEN j.attempt < j.max_attempts THEN NULL ELSE now() END,
    errors = array_append(j.errors, jsonb_build_object('at', now(), 'attempt', j.attempt, 'error', @error::text, 'trace', ''))
FROM stale
WHERE j.id = stale.id
RETURNING j.id, j.kind, j.args, j.state;

-- name: JobGetLive :one
-- Whether a job of a kind that beats still carries its work on: waiting
-- in the queue in any way, or running in a worker that beat within
-- stale_seconds (or started that recently).
SELECT (j.state IN ('available', 'pending', 'scheduled', 'retryable')
    OR (j.state = 'running' AND coalesce(h.beat_at, j.attempted_at) >= now() - make_interval(secs => @stale_seconds::float8)))::bool AS live,
    j.state::text AS state
FROM river_job j
LEFT JOIN job_heartbeats h ON h.job_id = j.id AND h.attempt = j.attempt
WHERE j.id = @id;

-- name: JobGetLiveForUpdate :one
-- JobGetLive with the job's row locked, so the sweep cannot put it back
-- meanwhile.
SELECT (j.state IN ('available', 'pending', 'scheduled', 'retryable')
    OR (j.state = 'running' AND coalesce(h.beat_at, j.attempted_at) >= now() - make_interval(secs => @stale_seconds::float8)))::bool AS live,
    j.state::text AS state
FROM river_job j
LEFT JOIN job_heartbeats h ON h.job_id = j.id AND h.attempt = j.attempt
WHERE j.id = @id
FOR UPDATE OF j;
