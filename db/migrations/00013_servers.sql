-- +goose Up
-- Web servers sharing this database. Each one beats here every 15 seconds,
-- so every server knows how many share the API and per-user rate limits
-- (internal/servers); rows not seen for an hour are pruned.
CREATE TABLE servers (
    id           uuid PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX servers_last_seen_at ON servers (last_seen_at);

-- The keys every server must share (the session key, the key that
-- encrypts stored secrets), as the first server to start recorded them:
-- an HMAC-SHA256 of a fixed label under the key, never the key.
CREATE TABLE key_fingerprints (
    setting     text PRIMARY KEY, -- the variable that sets the key, e.g. CURATE_SECRET_KEY
    fingerprint bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE key_fingerprints;
DROP TABLE servers;
