-- name: ServerInsert :exec
-- A web server's beat: it joins, or says it is still there (and rejoins
-- when its row was pruned while it was cut off from the database).
INSERT INTO servers (id) VALUES ($1)
ON CONFLICT (id) DO UPDATE SET last_seen_at = now();

-- name: ServerCountLive :one
-- The servers seen within the last @within_seconds, by the database's clock
-- so that the servers' clocks need not agree.
SELECT count(*) FROM servers
WHERE last_seen_at > now() - make_interval(secs => @within_seconds::float8);

-- name: ServerDeleteStale :execrows
DELETE FROM servers
WHERE last_seen_at < now() - make_interval(secs => @older_than_seconds::float8);

-- name: ServerDelete :exec
DELETE FROM servers WHERE id = $1;

-- name: KeyFingerprintInsert :exec
-- The first server to start records its key; later ones compare theirs.
INSERT INTO key_fingerprints (setting, fingerprint) VALUES ($1, $2)
ON CONFLICT (setting) DO NOTHING;

-- name: KeyFingerprintGet :one
SELECT * FROM key_fingerprints WHERE setting = $1;

-- name: WorkerInsert :exec
-- A worker's beat with what its trainer's probe reported: it joins, or
-- says it is still there (rejoining when its row was pruned).
INSERT INTO workers (id, host, device, gpu_slots, probe, probed_at)
VALUES (@id, @host, @device, @gpu_slots, @probe, @probed_at)
ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, device = EXCLUDED.device, gpu_slots = EXCLUDED.gpu_slots,
    probe = EXCLUDED.probe, probed_at = EXCLUDED.probed_at, last_seen_at = now();

-- name: WorkerList :many
-- The workers not yet pruned, the live ones first, each by host; live when
-- seen within the last @within_seconds by the database's clock, so that
-- the processes' clocks need not agree.
SELECT id, host, device, gpu_slots, probe, probed_at, started_at, last_seen_at,
    (last_seen_at > now() - make_interval(secs => @within_seconds::float8))::boolean AS live,
    extract(epoch FROM now() - last_seen_at)::float8 AS seen_seconds_ago
FROM workers
ORDER BY live DESC, host, last_seen_at DESC, id
LIMIT 100;

-- name: WorkerDeleteStale :execrows
DELETE FROM workers
WHERE last_seen_at < now() - make_interval(secs => @older_than_seconds::float8);

-- name: WorkerDelete :exec
DELETE FROM workers WHERE id = $1;
