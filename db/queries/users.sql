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

-- name: UserGetAdminsForUpdate :exec
-- Holds an organisation's admin set still until the transaction ends, so
-- that two admins demoting each other at once cannot leave it with none.
-- An advisory lock, keyed by the organisation, since the change may add an
-- admin row that no lock on existing rows would cover.
SELECT pg_advisory_xact_lock(hashtext(CAST(@org_id::uuid AS text)));

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

-- name: UserPreferencesGet :one
SELECT * FROM user_preferences WHERE org_id = @org_id AND user_id = @user_id;

-- name: UserPreferencesInsertOrUpdate :one
-- The user must be the organisation's: a user of another organisation
-- cannot be given settings here.
INSERT INTO user_preferences (org_id, user_id, auto_advance)
SELECT u.org_id, u.id, @auto_advance FROM users u WHERE u.org_id = @org_id AND u.id = @user_id
ON CONFLICT (org_id, user_id) DO UPDATE SET auto_advance = excluded.auto_advance, updated_at = now()
RETURNING *;
