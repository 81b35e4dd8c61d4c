-- name: AuditInsert :exec
INSERT INTO audit_log (org_id, actor_kind, actor_id, actor_label, action, target_type, target_id, details, ip)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: AuditList :many
SELECT * FROM audit_log
WHERE org_id = @org_id
  AND (@actor::text = '' OR actor_label = @actor)
  AND (@action::text = '' OR action = @action)
  AND (@before_id::bigint = 0 OR id < @before_id)
ORDER BY id DESC
LIMIT @row_limit;

-- name: AuditListActions :many
SELECT DISTINCT action FROM audit_log WHERE org_id = $1 ORDER BY action;

-- name: AuditGetLatest :one
-- The newest entry of one action on one target: who did it last, and when.
SELECT * FROM audit_log
WHERE org_id = @org_id::uuid AND action = @action AND target_type = @target_type AND target_id = @target_id
ORDER BY id DESC
LIMIT 1;
