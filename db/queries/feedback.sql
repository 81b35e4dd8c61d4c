-- name: FeedbackInsert :one
INSERT INTO feedback (
    id, org_id, external_id, session_id, trace_id, end_user_id, query, response, context, model, experiment_arm,
    feedback_type, rating, dim_accuracy, dim_helpfulness, dim_clarity, dim_safety, comment, correction,
    latency_ms, tags, source, rank, rank_group, pii_kinds, content_hash, status, experiment_id, duplicate_of, is_error,
    is_training_data, training_set_by, given_by, created_at
) VALUES (
    @id, @org_id, sqlc.narg('external_id'), @session_id, @trace_id, @end_user_id, @query, @response, @context, @model, @experiment_arm,
    @feedback_type, sqlc.narg('rating'), sqlc.narg('dim_accuracy'), sqlc.narg('dim_helpfulness'), sqlc.narg('dim_clarity'), sqlc.narg('dim_safety'),
    @comment, @correction, sqlc.narg('latency_ms'), @tags, @source, sqlc.narg('rank'), @rank_group, @pii_kinds, @content_hash, @status,
    sqlc.narg('experiment_id'),
    -- An exact duplicate links to the first row with the same content
    -- (feedback_first_id, migration 00105: read by its index however the
    -- plan was made).
    coalesce(sqlc.narg('duplicate_of')::uuid, feedback_first_id(@org_id, @content_hash)),
    @is_error, @is_training_data, @training_set_by, sqlc.narg('given_by'),
    -- When the feedback was given: now, unless the sender says (history).
    coalesce(sqlc.narg('created_at')::timestamptz, now())
)
-- An external id already stored stores nothing and returns no row: the
-- feedback_key_insert trigger (migration 00140) skips it, as ON CONFLICT
-- DO NOTHING did before feedback was partitioned.
-- Only what the database decides: the caller has the rest, and every
-- column sent back costs the ingest's hot path time on both sides.
RETURNING seq, context, duplicate_of, created_at, updated_at, version;

-- name: FeedbackGetByExternalID :one
-- External ids are unique in feedback_keys; its created_at picks the one
-- partition to read.
SELECT * FROM feedback
WHERE feedback.org_id = $1 AND (feedback.id, feedback.created_at) = (SELECT k.id, k.created_at FROM feedback_keys k WHERE k.org_id = $1 AND k.external_id = $2);

-- name: FeedbackListFirstByHash :many
-- The first stored row for each content hash, to link a batch's duplicates.
SELECT DISTINCT ON (content_hash) content_hash, id
FROM feedback
WHERE org_id = @org_id AND content_hash = ANY(@hashes::bytea[])
ORDER BY content_hash, seq;

-- name: FeedbackGet :one
SELECT sqlc.embed(f), coalesce(a.email, '')::text AS assignee_email, coalesce(r.email, '')::text AS reviewer_email,
       coalesce(g.email, '')::text AS given_by_email
FROM feedback f
LEFT JOIN users a ON a.id = f.assignee_id
LEFT JOIN users r ON r.id = f.reviewer_id
LEFT JOIN users g ON g.id = f.given_by
WHERE f.org_id = @org_id AND f.id = @id;

-- FeedbackList, FeedbackStatusCounts and FeedbackMatchingIDs filter with
-- feedback_matches (migration 00011), the queue's one filter.

-- name: FeedbackList :many
SELECT f.id, f.external_id, f.session_id, f.end_user_id, left(f.query, 300)::text AS query_preview,
       left(f.response, 300)::text AS response_preview, f.model, f.feedback_type, f.rating,
       f.dim_accuracy, f.dim_helpfulness, f.dim_clarity, f.dim_safety, f.tags, f.status, f.source,
       f.assignee_id, f.pii_kinds, f.duplicate_of, f.correction <> '' AS has_correction, f.created_at, f.version
FROM feedback f
WHERE feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
    @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
    sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
  AND (sqlc.narg('cursor_time')::timestamptz IS NULL OR (f.created_at, f.id) < (sqlc.narg('cursor_time'), sqlc.narg('cursor_id')::uuid))
ORDER BY f.created_at DESC, f.id DESC
LIMIT @row_limit;

-- name: FeedbackListByIDs :many
-- Whole items for a page the list found, for answers that show each item
-- as GET /:id does.
SELECT * FROM feedback WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- name: FeedbackCountByStatus :many
SELECT f.status, count(*) AS count
FROM feedback f
WHERE feedback_matches(f, @org_id::uuid, NULL::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
    @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
    sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
GROUP BY f.status;

-- name: FeedbackListMatchingIDs :many
-- Every id matching the queue's filter, for "all N matching" bulk actions.
SELECT f.id
FROM feedback f
WHERE feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
    @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
    sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
ORDER BY f.created_at DESC, f.id DESC
LIMIT @row_limit;

-- name: FeedbackUpdate :one
-- Optimistic locking: the write happens only if the version still matches.
UPDATE feedback SET
    status = @status, tags = @tags, correction = @correction, assignee_id = sqlc.narg('assignee_id'),
    reviewer_id = sqlc.narg('reviewer_id'), reviewed_at = sqlc.narg('reviewed_at'),
    updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id AND version = @version
RETURNING *;

-- name: FeedbackUpdateMany :many
-- One statement for a bulk action; each changed row gets a new version.
UPDATE feedback SET
    status = coalesce(sqlc.narg('status')::review_status, status),
    tags = CASE WHEN @add_tag::text = '' OR tags @> ARRAY[@add_tag::text] THEN tags ELSE array_append(tags, @add_tag::text) END,
    assignee_id = CASE WHEN @set_assignee::bool THEN sqlc.narg('assignee_id')::uuid ELSE assignee_id END,
    reviewer_id = CASE WHEN sqlc.narg('status')::review_status IS NULL THEN reviewer_id ELSE sqlc.narg('reviewer_id')::uuid END,
    reviewed_at = CASE WHEN sqlc.narg('status')::review_status IS NULL THEN reviewed_at ELSE now() END,
    updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = ANY(@ids::uuid[])
RETURNING id, status;

-- name: FeedbackReviewInsert :exec
INSERT INTO feedback_reviews (org_id, feedback_id, actor_id, actor_label, action, from_status, to_status, note)
VALUES (@org_id, @feedback_id, sqlc.narg('actor_id'), @actor_label, @action, sqlc.narg('from_status'), sqlc.narg('to_status'), @note);

-- name: FeedbackReviewInsertMany :copyfrom
INSERT INTO feedback_reviews (org_id, feedback_id, actor_id, actor_label, action, from_status, to_status, note)
VALUES (@org_id, @feedback_id, @actor_id, @actor_label, @action, @from_status, @to_status, @note);

-- name: FeedbackReviewList :many
SELECT * FROM feedback_reviews WHERE org_id = @org_id AND feedback_id = @feedback_id ORDER BY id;

-- name: FeedbackListModels :many
-- The organisation's model names (the first 200 in order), for the queue's
-- and the statistics' filters. A skip scan over feedback_org_model_idx: one
-- index probe per distinct model, so it stays quick however many items
-- there are.
WITH RECURSIVE models AS (
    (SELECT f.model FROM feedback f WHERE f.org_id = @org_id AND f.model > '' ORDER BY f.model LIMIT 1)
    UNION ALL
    SELECT (SELECT f.model FROM feedback f WHERE f.org_id = @org_id AND f.model > m.model ORDER BY f.model LIMIT 1)
    FROM models m
    WHERE m.model IS NOT NULL
)
SELECT model::text FROM models WHERE model IS NOT NULL LIMIT 200;

-- name: FeedbackInsertMany :copyfrom
INSERT INTO feedback (
    id, org_id, external_id, session_id, trace_id, end_user_id, query, response, context, model, experiment_arm,
    feedback_type, rating, dim_accuracy, dim_helpfulness, dim_clarity, dim_safety, comment, correction,
    latency_ms, tags, source, rank, rank_group, pii_kinds, content_hash, status, experiment_id, duplicate_of, is_error,
    is_training_data, training_set_by, given_by, created_at
) VALUES (
    @id, @org_id, @external_id, @session_id, @trace_id, @end_user_id, @query, @response, @context, @model, @experiment_arm,
    @feedback_type, @rating, @dim_accuracy, @dim_helpfulness, @dim_clarity, @dim_safety, @comment, @correction,
    @latency_ms, @tags, @source, @rank, @rank_group, @pii_kinds, @content_hash, @status, @experiment_id, @duplicate_of, @is_error,
    @is_training_data, @training_set_by, @given_by, @created_at
);

-- name: FeedbackGetNow :one
-- The database's clock, the time of the transaction: when a batch loaded
-- with COPY (which takes no defaults for the columns it names) was given,
-- for its items that do not say.
SELECT now()::timestamptz AS now;

-- name: FeedbackListExternalIDs :many
SELECT external_id::text FROM feedback_keys WHERE org_id = @org_id AND external_id = ANY(@external_ids::text[]);
