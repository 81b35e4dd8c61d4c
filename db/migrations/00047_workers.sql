-- +goose Up
-- The processes that work jobs (`curate worker`, and `curate serve` unless
-- --workers=0), the GPU queue among them. Each beats here every 15 seconds
-- with what its trainer's probe last reported, so that a web server that
-- cannot train tells a local launch that has a worker to run it from one
-- that has none (internal/servers); rows not seen for an hour are pruned.
CREATE TABLE workers (
    id           uuid PRIMARY KEY,
    host         text NOT NULL,
    device       text NOT NULL CHECK (device IN ('auto', 'cuda', 'cpu')), -- its CURATE_TRAINER_DEVICE
    gpu_slots    integer NOT NULL CHECK (gpu_slots >= 1),                 -- its CURATE_GPU_SLOTS
    probe        jsonb,       -- the trainer's probe report; null when the probe could not run
    probed_at    timestamptz,
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workers_last_seen_at ON workers (last_seen_at);

-- +goose Down
DROP TABLE workers;
