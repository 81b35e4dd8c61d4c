-- name: KeyFingerprintInsert :exec
-- The first server to start records its key; later ones compare theirs.
INSERT INTO key_fingerprints (setting, fingerprint) VALUES ($1, $2)
ON CONFLICT (setting) DO NOTHING;

-- name: KeyFingerprintGet :one
SELECT * FROM key_fingerprints WHERE setting = $1;
