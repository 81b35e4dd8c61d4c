-- +goose Up
-- Heartbeats of long jobs (exports, imports): while a worker runs an
-- attempt of such a job it updates the job's row every few seconds. A
-- periodic sweep puts a running job whose heartbeat has stopped (its
-- process died) back in the queue within about a minute, where River's own
-- rescue would wait for the job's timeout, hours for an export.
--
-- job_id is River's river_job.id and attempt its attempt number. There is
-- no foreign key: River owns and migrates its table; the sweep removes the
-- rows of jobs that no longer run.
CREATE TABLE job_heartbeats (
    job_id  bigint PRIMARY KEY,
    attempt integer NOT NULL,
    beat_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE job_heartbeats;
