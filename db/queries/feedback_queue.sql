-- name: FeedbackListKnownIDs :many
-- The ids among a bulk selection that belong to the organisation, so a
-- selection is counted and confirmed by what it really holds.
SELECT id FROM feedback WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- The item page's place in the queue: the queue's order is (created_at,
-- id) descending, and an item's neighbours are found from its key, whether
-- or not the item itself still matches the filter (an item just approved
-- leaves a "pending" filter, and the next one is still the one after it).
-- All three filter with feedback_matches (migration 00011), as the queue does.

-- name: FeedbackGetNext :one
SELECT f.id
FROM feedback f
WHERE feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
    @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
    sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
  AND (f.created_at, f.id) < (@key_time::timestamptz, @key_id::uuid)
ORDER BY f.created_at DESC, f.id DESC
LIMIT 1;

-- name: FeedbackGetPrevious :one
SELECT f.id
FROM feedback f
WHERE feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
    @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
    sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
  AND (f.created_at, f.id) > (@key_time::timestamptz, @key_id::uuid)
ORDER BY f.created_at, f.id
LIMIT 1;

-- name: FeedbackCountPosition :one
-- How many matching items come before the key, how many match in all, and
-- whether the keyed item is one of them.
WITH m AS (
    SELECT f.created_at, f.id
    FROM feedback f
    WHERE feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
        @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
        sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
)
SELECT count(*) FILTER (WHERE (m.created_at, m.id) > (@key_time::timestamptz, @key_id::uuid)) AS before,
       count(*) AS total,
       count(*) FILTER (WHERE m.id = @key_id::uuid) > 0 AS matches
FROM m;
