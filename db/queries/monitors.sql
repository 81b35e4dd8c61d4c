-- Production monitors: the served versions, what their feedback says in a
-- window, and the live scores of their answers.

-- name: MonitorSettingsGet :one
SELECT * FROM monitor_settings WHERE org_id = @org_id;

-- name: MonitorSettingsInsertOrUpdate :exec
INSERT INTO monitor_settings (org_id, enabled, window_hours, min_samples, latency_p95_ms, feedback_drop, error_rate, shift_test,
    shift_window_hours, shift_p_value, shift_psi, reward_latency_p95_ms, reward_drift, updated_at)
VALUES (@org_id, @enabled, @window_hours, @min_samples, @latency_p95_ms, @feedback_drop, @error_rate, @shift_test,
    @shift_window_hours, @shift_p_value, @shift_psi, @reward_latency_p95_ms, @reward_drift, now())
ON CONFLICT (org_id) DO UPDATE SET enabled = EXCLUDED.enabled, window_hours = EXCLUDED.window_hours, min_samples = EXCLUDED.min_samples,
    latency_p95_ms = EXCLUDED.latency_p95_ms, feedback_drop = EXCLUDED.feedback_drop, error_rate = EXCLUDED.error_rate,
    shift_test = EXCLUDED.shift_test, shift_window_hours = EXCLUDED.shift_window_hours, shift_p_value = EXCLUDED.shift_p_value,
    shift_psi = EXCLUDED.shift_psi, reward_latency_p95_ms = EXCLUDED.reward_latency_p95_ms, reward_drift = EXCLUDED.reward_drift,
    updated_at = now();

-- name: MonitorListServedVersions :many
-- The versions served now: by a deployment still loaded, or as an arm of
-- a running or paused experiment; each with when it was first served
-- (its first week is the score distribution's reference) and the names
-- feedback may give it (its model id, its deployments' served names).
WITH served AS (
    SELECT d.version_id, d.created_at AS since FROM deployments d
    WHERE d.org_id = @org_id AND d.status = 'succeeded'
    UNION ALL
    SELECT a.model_version_id, coalesce(e.started_at, e.created_at) FROM experiment_arms a JOIN experiments e ON e.id = a.experiment_id
    WHERE e.org_id = @org_id AND e.status IN ('running', 'paused')
),
live AS (
    SELECT d.version_id FROM deployments d WHERE d.org_id = @org_id AND d.status = 'succeeded' AND d.unloaded_at IS NULL
    UNION
    SELECT a.model_version_id FROM experiment_arms a JOIN experiments e ON e.id = a.experiment_id
    WHERE e.org_id = @org_id AND e.status IN ('running', 'paused')
)
SELECT mv.id, m.name AS model_name, mv.version, mv.kind, (SELECT min(s.since) FROM served s WHERE s.version_id = mv.id)::timestamptz AS first_served,
       array_remove(array_prepend(mv.model_id::text, coalesce((SELECT array_agg(DISTINCT d.served_name) FROM deployments d
           WHERE d.version_id = mv.id AND d.served_name <> ''), '{}')::text[]), NULL)::text[] AS names
FROM model_versions mv JOIN registered_models m ON m.id = mv.registered_model_id
WHERE mv.org_id = @org_id AND mv.id IN (SELECT version_id FROM live)
ORDER BY m.name, mv.created_at;

-- name: MonitorGetWindow :one
-- A version's feedback in a window: how much, its latency p95 (of the
-- feedback reporting one) and how much reported an error. Its feedback is
-- what names it (model) or was attributed to an experiment arm it is.
SELECT count(*)::bigint AS feedback, count(f.latency_ms)::bigint AS with_latency,
       coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY f.latency_ms), 0)::float8 AS latency_p95,
       count(*) FILTER (WHERE f.is_error)::bigint AS errors
FROM feedback f
WHERE f.org_id = @org_id AND f.created_at >= @since AND f.created_at < @until
  AND (f.model = ANY(@names::text[]) OR EXISTS (SELECT 1 FROM experiment_arms a
        WHERE a.experiment_id = f.experiment_id AND a.name = f.experiment_arm AND a.model_version_id = @version_id));

-- name: MonitorListScores :many
-- The live scores of a version's answers in a window, newest first.
SELECT s.score::float8 AS score
FROM live_scores s JOIN feedback f ON f.id = s.feedback_id
WHERE s.org_id = @org_id AND s.status = 'scored' AND f.created_at >= @since AND f.created_at < @until
  AND (f.model = ANY(@names::text[]) OR EXISTS (SELECT 1 FROM experiment_arms a
        WHERE a.experiment_id = f.experiment_id AND a.name = f.experiment_arm AND a.model_version_id = @version_id))
ORDER BY f.created_at DESC LIMIT @row_limit;

-- name: MonitorGetRewardCalls :one
-- A reward model's requests in a window: how many, their latency p95, and
-- how many live ones scored with their mean score.
SELECT count(*)::bigint AS calls,
       coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY c.latency_ms), 0)::float8 AS latency_p95,
       count(*) FILTER (WHERE c.purpose = 'live' AND c.score IS NOT NULL)::bigint AS live_scored,
       coalesce(avg(c.score) FILTER (WHERE c.purpose = 'live'), 0)::float8 AS live_mean
FROM reward_model_calls c
WHERE c.org_id = @org_id AND c.version_id = @version_id AND c.created_at >= @since AND c.created_at < @until;
