-- +goose Up
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
