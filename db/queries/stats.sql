-- Every stats query takes the same window (created_at in [since, until))
-- and optional model; an empty model means every model.

-- name: StatsListDaily :many
-- Feedback per UTC day and model.
SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')::text AS day, model,
       count(*) AS total,
       count(*) FILTER (WHERE feedback_type = 'thumbs_up') AS thumbs_up,
       count(*) FILTER (WHERE feedback_type = 'thumbs_down') AS thumbs_down,
       count(rating) AS ratings,
       coalesce(sum(rating), 0)::bigint AS rating_sum
FROM feedback
WHERE org_id = @org_id AND created_at >= @since AND created_at < @until AND (@model::text = '' OR model = @model)
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: StatsGetDimensions :one
SELECT count(dim_accuracy) AS accuracy_n, coalesce(avg(dim_accuracy), 0)::float8 AS accuracy,
       count(dim_helpfulness) AS helpfulness_n, coalesce(avg(dim_helpfulness), 0)::float8 AS helpfulness,
       count(dim_clarity) AS clarity_n, coalesce(avg(dim_clarity), 0)::float8 AS clarity,
       count(dim_safety) AS safety_n, coalesce(avg(dim_safety), 0)::float8 AS safety
FROM feedback
WHERE org_id = @org_id AND created_at >= @since AND created_at < @until AND (@model::text = '' OR model = @model);

-- name: StatsListRatingDistribution :many
SELECT rating::int AS rating, count(*) AS count
FROM feedback
WHERE org_id = @org_id AND created_at >= @since AND created_at < @until AND (@model::text = '' OR model = @model)
  AND rating IS NOT NULL
GROUP BY 1 ORDER BY 1;

-- name: StatsCountByStatus :many
SELECT status, count(*) AS count
FROM feedback
WHERE org_id = @org_id AND created_at >= @since AND created_at < @until AND (@model::text = '' OR model = @model)
GROUP BY status ORDER BY status;

-- name: StatsListCuratorThroughput :many
-- Review actions per person in the window, by the status they set.
SELECT r.actor_label,
       count(*) AS actions,
       count(*) FILTER (WHERE r.to_status = 'approved') AS approved,
       count(*) FILTER (WHERE r.to_status = 'rejected') AS rejected,
       count(*) FILTER (WHERE r.to_status IN ('corrected', 'needs_correction')) AS corrected,
       max(r.created_at)::timestamptz AS last_action
FROM feedback_reviews r
JOIN feedback f ON f.id = r.feedback_id
WHERE r.org_id = @org_id AND r.created_at >= @since AND r.created_at < @until AND (@model::text = '' OR f.model = @model)
GROUP BY r.actor_label
ORDER BY actions DESC, r.actor_label;
