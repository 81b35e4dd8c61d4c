-- name: SessionInsert :exec
INSERT INTO sessions (id, user_id, org_id, expires_at, user_agent, ip)
VALUES (@id, @user_id, @org_id, @expires_at, @user_agent, @ip);

-- name: SessionGetWithUser :one
-- A live session with its active user and their organisation, read on
-- every page request: one primary-key lookup and two joins by key.
SELECT s.last_seen_at, u.id AS user_id, u.org_id, u.email, u.role, o.slug AS org_slug, o.name AS org_name
FROM sessions s
JOIN users u ON u.id = s.user_id
JOIN organizations o ON o.id = u.org_id
WHERE s.id = @id AND s.expires_at > now() AND u.active;

-- name: SessionUpdateLastSeen :exec
UPDATE sessions SET last_seen_at = now() WHERE id = @id;

-- name: SessionListByUser :many
SELECT id, created_at, last_seen_at, user_agent, ip
FROM sessions
WHERE user_id = @user_id AND expires_at > now()
ORDER BY last_seen_at DESC, created_at DESC;

-- name: SessionDelete :one
-- Ends one session, saying whose it was.
WITH gone AS (DELETE FROM sessions WHERE sessions.id = @id RETURNING user_id, org_id)
SELECT g.user_id, g.org_id, u.email FROM gone g JOIN users u ON u.id = g.user_id;

-- name: SessionDeleteByUser :execrows
DELETE FROM sessions WHERE user_id = @user_id;

-- name: SessionDeleteExpired :exec
DELETE FROM sessions WHERE expires_at < @before;
