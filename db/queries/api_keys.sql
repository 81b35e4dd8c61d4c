-- name: APIKeyInsert :one
INSERT INTO api_keys (org_id, name, prefix, secret_hash, role, created_by)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING *;

-- name: APIKeyGetCaller :one
-- A key, its organisation and its creator's current standing, read on
-- every API request (the key's role is capped by its creator's).
SELECT k.id, k.org_id, k.name, k.secret_hash, k.role, k.revoked_at, k.created_by,
    u.role AS owner_role, (u.id IS NOT NULL AND NOT u.active)::bool AS owner_deactivated,
    o.slug AS org_slug, o.name AS org_name
FROM api_keys k
JOIN organizations o ON o.id = k.org_id
LEFT JOIN users u ON u.id = k.created_by
WHERE k.prefix = $1;

-- name: APIKeyList :many
SELECT k.*, coalesce(u.email, '')::text AS owner_email, u.role AS owner_role,
    (u.id IS NOT NULL AND NOT u.active)::bool AS owner_deactivated
FROM api_keys k
LEFT JOIN users u ON u.id = k.created_by
WHERE k.org_id = $1
ORDER BY k.created_at DESC, k.id;

-- name: APIKeyUpdateRevoked :one
UPDATE api_keys SET revoked_at = now()
WHERE org_id = $1 AND id = $2 AND revoked_at IS NULL
RETURNING *;

-- name: APIKeyUpdateLastUsed :exec
-- Recording every use would write on every request; a minute's precision is enough.
UPDATE api_keys SET last_used_at = now()
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');
