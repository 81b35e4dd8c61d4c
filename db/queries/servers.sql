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
