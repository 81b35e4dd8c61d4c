-- name: UserInsert :one
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

-- name: UserUpdateActive :one
UPDATE users SET active = $3, updated_at = now()
WHERE org_id = $1 AND id = $2
RETURNING *;

-- name: UserUpdatePassword :exec
UPDATE users SET password_hash = @password_hash, updated_at = now()
WHERE org_id = @org_id AND id = @id;
