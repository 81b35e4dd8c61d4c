-- name: AlertListOrgIDs :many
SELECT id FROM organizations ORDER BY id;

-- name: AlertSettingsGet :one
SELECT * FROM alert_settings WHERE org_id = @org_id;

-- name: AlertSettingsInsertOrUpdate :one
INSERT INTO alert_settings (org_id, enabled, rating_threshold, min_ratings, window_hours, baseline_days,
                            spike_factor, spike_min_count, webhook_url, updated_at)
VALUES (@org_id, @enabled, @rating_threshold, @min_ratings, @window_hours, @baseline_days,
        @spike_factor, @spike_min_count, @webhook_url, now())
ON CONFLICT (org_id) DO UPDATE SET
    enabled = EXCLUDED.enabled, rating_threshold = EXCLUDED.rating_threshold, min_ratings = EXCLUDED.min_ratings,
    window_hours = EXCLUDED.window_hours, baseline_days = EXCLUDED.baseline_days, spike_factor = EXCLUDED.spike_factor,
    spike_min_count = EXCLUDED.spike_min_count, webhook_url = EXCLUDED.webhook_url, updated_at = now()
RETURNING *;

-- name: AlertSettingsUpdateSecret :exec
-- Stores a new sealed secret, replacing the old one, sealed or not.
INSERT INTO alert_settings (org_id, webhook_secret_ciphertext, webhook_secret_nonce)
VALUES (@org_id, @ciphertext, @nonce)
ON CONFLICT (org_id) DO UPDATE SET webhook_secret_ciphertext = EXCLUDED.webhook_secret_ciphertext,
    webhook_secret_nonce = EXCLUDED.webhook_secret_nonce, webhook_secret = '', updated_at = now();

-- name: AlertSettingsUpdateSealedSecret :exec
-- Seals a secret stored in the clear before migration 00014, unless another
-- server sealed or replaced it meanwhile.
UPDATE alert_settings
SET webhook_secret_ciphertext = @ciphertext, webhook_secret_nonce = @nonce, webhook_secret = ''
WHERE org_id = @org_id AND webhook_secret = @plaintext::text AND webhook_secret <> '';

-- name: AlertListRatingsByVersion :many
-- Ratings in the evaluation window per registered version, where the model
-- the feedback names is one (its model id, or a name a deployment served
-- it under), else per model as named. A version is named as registered
-- ("support 1.1.0"); models lists the names its feedback gave. Feedback
-- naming no version has the nil version id.
WITH names AS (
    SELECT mv.id AS version_id, m.name || ' ' || mv.version AS label, mv.model_id AS name
    FROM model_versions mv JOIN registered_models m ON m.id = mv.registered_model_id
    WHERE mv.org_id = @org_id
    UNION
    SELECT mv.id, m.name || ' ' || mv.version, d.served_name
    FROM deployments d JOIN model_versions mv ON mv.id = d.version_id JOIN registered_models m ON m.id = mv.registered_model_id
    WHERE d.org_id = @org_id AND d.served_name <> ''
),
rated AS (
    SELECT f.model, f.rating, n.version_id, n.label
    FROM feedback f
    LEFT JOIN LATERAL (SELECT x.version_id, x.label FROM names x WHERE x.name = f.model ORDER BY x.version_id LIMIT 1) n ON true
    WHERE f.org_id = @org_id AND f.created_at >= @since AND f.created_at < @until AND f.rating IS NOT NULL
)
SELECT coalesce(version_id, '00000000-0000-0000-0000-000000000000')::uuid AS version_id, coalesce(label, model)::text AS label, array_agg(DISTINCT model ORDER BY model)::text[] AS models,
       count(*) AS ratings, coalesce(sum(rating), 0)::bigint AS rating_sum
FROM rated
GROUP BY version_id, coalesce(label, model)
ORDER BY 2;

-- name: AlertCountThumbsDown :one
-- Thumbs-down in the window and in the trailing baseline before it, and
-- whether the baseline saw any feedback at all.
SELECT count(*) FILTER (WHERE created_at >= @window_start AND feedback_type = 'thumbs_down') AS in_window,
       count(*) FILTER (WHERE created_at < @window_start AND feedback_type = 'thumbs_down') AS in_baseline,
       count(*) FILTER (WHERE created_at < @window_start) AS baseline_feedback
FROM feedback
WHERE org_id = @org_id AND created_at >= @baseline_start AND created_at < @until;

-- name: AlertCountSafetyReports :one
-- Safety reports in the window that no curator has looked at yet.
SELECT count(*) AS reports, coalesce(max(created_at), 'epoch'::timestamptz)::timestamptz AS newest
FROM feedback
WHERE org_id = @org_id AND created_at >= @since AND created_at < @until AND status = 'pending'
  AND (dim_safety <= 2 OR tags @> ARRAY['safety']);

-- name: AlertListOpen :many
-- The open alerts the rules decide about: an alert an event opened (a
-- loop's failed run) is resolved by what follows the event, not by them.
SELECT * FROM alerts WHERE org_id = @org_id AND resolved_at IS NULL AND kind <> 'loop_run' ORDER BY opened_at;

-- name: AlertInsert :one
INSERT INTO alerts (org_id, kind, severity, dedup_key, title, message, details, opened_at, last_seen_at)
VALUES (@org_id, @kind, @severity, @dedup_key, @title, @message, @details, @now, @now)
RETURNING *;

-- name: AlertUpdateSeen :exec
-- The condition still holds: keep the alert and its numbers current.
UPDATE alerts SET severity = @severity, title = @title, message = @message, details = @details, last_seen_at = @now
WHERE org_id = @org_id AND id = @id;

-- name: AlertUpdateResolved :exec
UPDATE alerts SET resolved_at = @now::timestamptz WHERE org_id = @org_id AND id = @id AND resolved_at IS NULL;

-- name: AlertListBanners :many
-- The banners on every page (a line each, or one line for them all past
-- two); served by alerts_banner_idx.
SELECT id, kind, severity, title, message FROM alerts
WHERE org_id = @org_id AND resolved_at IS NULL AND dismissed_at IS NULL
ORDER BY opened_at DESC LIMIT 20;

-- name: AlertList :many
SELECT a.*, coalesce(u.email, '')::text AS dismissed_by_email
FROM alerts a LEFT JOIN users u ON u.id = a.dismissed_by
WHERE a.org_id = @org_id
  AND (sqlc.narg('cursor_time')::timestamptz IS NULL OR (a.opened_at, a.id) < (sqlc.narg('cursor_time'), sqlc.narg('cursor_id')::uuid))
ORDER BY a.opened_at DESC, a.id DESC
LIMIT @row_limit;

-- name: AlertGet :one
SELECT * FROM alerts WHERE org_id = @org_id AND id = @id;

-- name: AlertUpdateDismissed :one
UPDATE alerts SET dismissed_at = now(), dismissed_by = sqlc.narg('dismissed_by')
WHERE org_id = @org_id AND id = @id AND dismissed_at IS NULL
RETURNING *;

-- name: AlertUpdateDelivered :exec
UPDATE alerts SET webhook_delivered_at = now(), webhook_error = '' WHERE org_id = @org_id AND id = @id;

-- name: AlertUpdateWebhookError :exec
UPDATE alerts SET webhook_error = @webhook_error WHERE org_id = @org_id AND id = @id;

-- name: AlertGetOpenByKey :one
SELECT * FROM alerts WHERE org_id = @org_id AND dedup_key = @dedup_key AND resolved_at IS NULL;

-- name: AlertUpdateResolvedByKey :exec
UPDATE alerts SET resolved_at = now() WHERE org_id = @org_id AND dedup_key = @dedup_key AND resolved_at IS NULL;

-- name: AlertListOpenMonitors :many
-- The open production-monitor alerts of a version: a rollout treats them
-- as a guardrail breach.
SELECT * FROM alerts
WHERE org_id = @org_id AND resolved_at IS NULL AND kind LIKE 'monitor\_%' AND details->>'version_id' = @version_id::text
ORDER BY opened_at;
