-- name: ImportRunInsert :one
INSERT INTO import_runs (id, org_id, kind, file_name, file_size, created_by, created_by_label)
VALUES (@id, @org_id, @kind, @file_name, @file_size, sqlc.narg('created_by'), @created_by_label)
RETURNING *;

-- name: ImportRunGet :one
SELECT * FROM import_runs WHERE org_id = @org_id AND id = @id;

-- name: ImportRunList :many
SELECT * FROM import_runs WHERE org_id = @org_id ORDER BY created_at DESC, id DESC LIMIT @row_limit;

-- name: ImportRunUpdateStarted :exec
-- A retried job starts over: the earlier attempt's transaction was rolled back.
UPDATE import_runs
SET status = 'running', phase = 'checking', bytes_done = 0, error = '', error_line = NULL,
    started_at = now(), finished_at = NULL, updated_at = now()
WHERE org_id = @org_id AND id = @id;

-- name: ImportRunUpdateProgress :exec
UPDATE import_runs SET phase = @phase, bytes_done = @bytes_done, updated_at = now()
WHERE org_id = @org_id AND id = @id;

-- name: ImportRunUpdateFinished :exec
UPDATE import_runs
SET status = @status, phase = '', bytes_done = CASE WHEN @status = 'succeeded' THEN file_size ELSE bytes_done END,
    stored = @stored, duplicates = @duplicates, skipped = @skipped, skip_reasons = @skip_reasons,
    error = @error, error_line = sqlc.narg('error_line'), finished_at = now(), updated_at = now()
WHERE org_id = @org_id AND id = @id;

-- name: LangfuseConnectionGet :one
SELECT * FROM langfuse_connections WHERE org_id = $1;

-- name: LangfuseConnectionInsertOrUpdate :one
-- Changing the connection starts the next sync from the beginning: another
-- project's scores have other timestamps (and re-reading is idempotent).
INSERT INTO langfuse_connections (org_id, host, public_key, secret_ciphertext, secret_nonce, updated_by)
VALUES (@org_id, @host, @public_key, @secret_ciphertext, @secret_nonce, sqlc.narg('updated_by'))
ON CONFLICT (org_id) DO UPDATE
SET host = excluded.host, public_key = excluded.public_key, secret_ciphertext = excluded.secret_ciphertext,
    secret_nonce = excluded.secret_nonce, updated_by = excluded.updated_by, last_error = '',
    sync_from = CASE WHEN langfuse_connections.host = excluded.host AND langfuse_connections.public_key = excluded.public_key
                     THEN langfuse_connections.sync_from END,
    updated_at = now()
RETURNING *;

-- name: LangfuseConnectionListOrgIDs :many
-- Every organisation with a connection, for the periodic sync.
SELECT org_id FROM langfuse_connections ORDER BY org_id;

-- name: LangfuseConnectionUpdateSyncStarted :exec
UPDATE langfuse_connections SET sync_started_at = now(), last_attempt_at = now(), updated_at = now()
WHERE org_id = $1;

-- name: LangfuseConnectionUpdateSyncSucceeded :exec
UPDATE langfuse_connections
SET sync_started_at = NULL, last_sync_at = now(), sync_from = sqlc.narg('sync_from'),
    last_stored = @last_stored::integer, last_duplicates = @last_duplicates, last_skipped = @last_skipped,
    last_skip_reasons = @last_skip_reasons, total_stored = total_stored + @last_stored::integer, last_error = '',
    updated_at = now()
WHERE org_id = @org_id;

-- name: LangfuseConnectionUpdateSyncFailed :exec
UPDATE langfuse_connections SET sync_started_at = NULL, last_error = @last_error, updated_at = now()
WHERE org_id = @org_id;

-- name: LangfuseConnectionUpdateError :exec
UPDATE langfuse_connections SET last_error = @last_error, updated_at = now() WHERE org_id = @org_id;
