-- name: UserCreate :one
INSERT INTO users (org_id, email, name, password_hash, role)
VALUES ($1, $2, $3, $4, $5)
RETURNING *;

-- name: UserGet :one
SELECT * FROM users WHERE org_id = $1 AND id = $2;

-- name: UserGetByEmail :one
SELECT * FROM users WHERE lower(email) = lower(@email::text);

-- name: UserList :many
SELECT * FROM users WHERE org_id = $1 ORDER BY created_at, id;

-- name: UserCountAdmins :one
SELECT count(*) FROM users WHERE org_id = $1 AND role = 'admin' AND active;

-- name: UserUpdateRole :one
UPDATE users SET role = $3, updated_at = now()
WHERE org_id = $1 AND id = $2
RETURNING *;

-- name: UserSetActive :one
UPDATE users SET active = $3, updated_at = now()
WHERE org_id = $1 AND id = $2
RETURNING *;

-- name: UserWithOrg :one
-- The signed-in user and their organisation, read on every page request.
SELECT u.id, u.org_id, u.email, u.role, u.active, o.slug AS org_slug, o.name AS org_name
FROM users u JOIN organizations o ON o.id = u.org_id
WHERE u.id = $1;
