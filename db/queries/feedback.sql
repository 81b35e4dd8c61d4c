-- The queue's filters appear in FeedbackList, FeedbackStatusCounts and
-- FeedbackMatchingIDs: keep the three WHERE clauses the same.

-- name: FeedbackInsert :one
INSERT INTO feedback (
    id, org_id, external_id, session_id, trace_id, end_user_id, query, response, context, model, experiment_arm,
    feedback_type, rating, dim_accuracy, dim_helpfulness, dim_clarity, dim_safety, comment, correction,
    latency_ms, tags, source, rank, rank_group, pii_kinds, content_hash, status, duplicate_of
) VALUES (
    @id, @org_id, sqlc.narg('external_id'), @session_id, @trace_id, @end_user_id, @query, @response, @context, @model, @experiment_arm,
    @feedback_type, sqlc.narg('rating'), sqlc.narg('dim_accuracy'), sqlc.narg('dim_helpfulness'), sqlc.narg('dim_clarity'), sqlc.narg('dim_safety'),
    @comment, @correction, sqlc.narg('latency_ms'), @tags, @source, sqlc.narg('rank'), @rank_group, @pii_kinds, @content_hash, @status,
    -- An exact duplicate links to the first row with the same content.
    coalesce(sqlc.narg('duplicate_of')::uuid,
             (SELECT d.id FROM feedback d WHERE d.org_id = @org_id AND d.content_hash = @content_hash ORDER BY d.seq LIMIT 1))
)
ON CONFLICT (org_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
RETURNING *;

-- name: FeedbackGetByExternalID :one
SELECT * FROM feedback WHERE org_id = $1 AND external_id = $2;

-- name: FeedbackFirstByHash :many
-- The first stored row for each content hash, to link a batch's duplicates.
SELECT DISTINCT ON (content_hash) content_hash, id
FROM feedback
WHERE org_id = @org_id AND content_hash = ANY(@hashes::bytea[])
ORDER BY content_hash, seq;

-- name: FeedbackGet :one
SELECT sqlc.embed(f), coalesce(a.email, '')::text AS assignee_email, coalesce(r.email, '')::text AS reviewer_email
FROM feedback f
LEFT JOIN users a ON a.id = f.assignee_id
LEFT JOIN users r ON r.id = f.reviewer_id
WHERE f.org_id = @org_id AND f.id = @id;

-- name: FeedbackList :many
SELECT f.id, f.external_id, f.session_id, f.end_user_id, left(f.query, 300)::text AS query_preview,
       left(f.response, 300)::text AS response_preview, f.model, f.feedback_type, f.rating,
       f.dim_accuracy, f.dim_helpfulness, f.dim_clarity, f.dim_safety, f.tags, f.status, f.source,
       f.assignee_id, f.pii_kinds, f.duplicate_of, f.correction <> '' AS has_correction, f.created_at, f.version
FROM feedback f
WHERE f.org_id = @org_id
  AND (sqlc.narg('status')::review_status IS NULL OR f.status = sqlc.narg('status'))
  AND (sqlc.narg('feedback_type')::feedback_type IS NULL OR f.feedback_type = sqlc.narg('feedback_type'))
  AND (sqlc.narg('source')::feedback_source IS NULL OR f.source = sqlc.narg('source'))
  AND (@rating_min::int = 0 OR f.rating >= @rating_min)
  AND (@rating_max::int = 0 OR f.rating <= @rating_max)
  AND (@dim_below::int = 0 OR least(coalesce(f.dim_accuracy, 9), coalesce(f.dim_helpfulness, 9), coalesce(f.dim_clarity, 9), coalesce(f.dim_safety, 9)) < @dim_below)
  AND (@tag::text = '' OR f.tags @> ARRAY[@tag::text])
  AND (@model::text = '' OR f.model = @model)
  AND (sqlc.narg('assignee_id')::uuid IS NULL OR f.assignee_id = sqlc.narg('assignee_id'))
  AND (sqlc.narg('created_from')::timestamptz IS NULL OR f.created_at >= sqlc.narg('created_from'))
  AND (sqlc.narg('created_to')::timestamptz IS NULL OR f.created_at < sqlc.narg('created_to'))
  AND (@with_duplicates::bool OR f.duplicate_of IS NULL)
  AND (NOT @pii_only::bool OR f.pii_kinds <> '{}')
  AND (@q::text = '' OR feedback_document(f.query, f.response, f.comment) @@ websearch_to_tsquery('english', @q))
  AND (sqlc.narg('dataset_id')::uuid IS NULL OR EXISTS (
       SELECT 1 FROM training_dataset_members m
       WHERE m.org_id = @org_id AND m.dataset_id = sqlc.narg('dataset_id') AND m.feedback_id = f.id))
  AND (sqlc.narg('cursor_time')::timestamptz IS NULL OR (f.created_at, f.id) < (sqlc.narg('cursor_time'), sqlc.narg('cursor_id')::uuid))
ORDER BY f.created_at DESC, f.id DESC
LIMIT @row_limit;

-- name: FeedbackListByIDs :many
-- Whole items for a page the list found, for answers that show each item
-- as GET /:id does.
SELECT * FROM feedback WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- name: FeedbackStatusCounts :many
SELECT f.status, count(*) AS count
FROM feedback f
WHERE f.org_id = @org_id
  AND (sqlc.narg('feedback_type')::feedback_type IS NULL OR f.feedback_type = sqlc.narg('feedback_type'))
  AND (sqlc.narg('source')::feedback_source IS NULL OR f.source = sqlc.narg('source'))
  AND (@rating_min::int = 0 OR f.rating >= @rating_min)
  AND (@rating_max::int = 0 OR f.rating <= @rating_max)
  AND (@dim_below::int = 0 OR least(coalesce(f.dim_accuracy, 9), coalesce(f.dim_helpfulness, 9), coalesce(f.dim_clarity, 9), coalesce(f.dim_safety, 9)) < @dim_below)
  AND (@tag::text = '' OR f.tags @> ARRAY[@tag::text])
  AND (@model::text = '' OR f.model = @model)
  AND (sqlc.narg('assignee_id')::uuid IS NULL OR f.assignee_id = sqlc.narg('assignee_id'))
  AND (sqlc.narg('created_from')::timestamptz IS NULL OR f.created_at >= sqlc.narg('created_from'))
  AND (sqlc.narg('created_to')::timestamptz IS NULL OR f.created_at < sqlc.narg('created_to'))
  AND (@with_duplicates::bool OR f.duplicate_of IS NULL)
  AND (NOT @pii_only::bool OR f.pii_kinds <> '{}')
  AND (@q::text = '' OR feedback_document(f.query, f.response, f.comment) @@ websearch_to_tsquery('english', @q))
  AND (sqlc.narg('dataset_id')::uuid IS NULL OR EXISTS (
       SELECT 1 FROM training_dataset_members m
       WHERE m.org_id = @org_id AND m.dataset_id = sqlc.narg('dataset_id') AND m.feedback_id = f.id))
GROUP BY f.status;

-- name: FeedbackMatchingIDs :many
-- Every id matching the queue's filter, for "all N matching" bulk actions.
SELECT f.id
FROM feedback f
WHERE f.org_id = @org_id
  AND (sqlc.narg('status')::review_status IS NULL OR f.status = sqlc.narg('status'))
  AND (sqlc.narg('feedback_type')::feedback_type IS NULL OR f.feedback_type = sqlc.narg('feedback_type'))
  AND (sqlc.narg('source')::feedback_source IS NULL OR f.source = sqlc.narg('source'))
  AND (@rating_min::int = 0 OR f.rating >= @rating_min)
  AND (@rating_max::int = 0 OR f.rating <= @rating_max)
  AND (@dim_below::int = 0 OR least(coalesce(f.dim_accuracy, 9), coalesce(f.dim_helpfulness, 9), coalesce(f.dim_clarity, 9), coalesce(f.dim_safety, 9)) < @dim_below)
  AND (@tag::text = '' OR f.tags @> ARRAY[@tag::text])
  AND (@model::text = '' OR f.model = @model)
  AND (sqlc.narg('assignee_id')::uuid IS NULL OR f.assignee_id = sqlc.narg('assignee_id'))
  AND (sqlc.narg('created_from')::timestamptz IS NULL OR f.created_at >= sqlc.narg('created_from'))
  AND (sqlc.narg('created_to')::timestamptz IS NULL OR f.created_at < sqlc.narg('created_to'))
  AND (@with_duplicates::bool OR f.duplicate_of IS NULL)
  AND (NOT @pii_only::bool OR f.pii_kinds <> '{}')
  AND (@q::text = '' OR feedback_document(f.query, f.response, f.comment) @@ websearch_to_tsquery('english', @q))
  AND (sqlc.narg('dataset_id')::uuid IS NULL OR EXISTS (
       SELECT 1 FROM training_dataset_members m
       WHERE m.org_id = @org_id AND m.dataset_id = sqlc.narg('dataset_id') AND m.feedback_id = f.id))
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

-- name: FeedbackBulkUpdate :many
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

-- name: FeedbackReviews :many
SELECT * FROM feedback_reviews WHERE org_id = @org_id AND feedback_id = @feedback_id ORDER BY id;

-- name: FeedbackModels :many
SELECT DISTINCT model FROM feedback WHERE org_id = $1 AND model <> '' ORDER BY model LIMIT 200;

-- name: FeedbackCopy :copyfrom
INSERT INTO feedback (
    id, org_id, external_id, session_id, trace_id, end_user_id, query, response, context, model, experiment_arm,
    feedback_type, rating, dim_accuracy, dim_helpfulness, dim_clarity, dim_safety, comment, correction,
    latency_ms, tags, source, rank, rank_group, pii_kinds, content_hash, status, duplicate_of
) VALUES (
    @id, @org_id, @external_id, @session_id, @trace_id, @end_user_id, @query, @response, @context, @model, @experiment_arm,
    @feedback_type, @rating, @dim_accuracy, @dim_helpfulness, @dim_clarity, @dim_safety, @comment, @correction,
    @latency_ms, @tags, @source, @rank, @rank_group, @pii_kinds, @content_hash, @status, @duplicate_of
);

-- name: FeedbackExistingExternalIDs :many
SELECT external_id::text FROM feedback WHERE org_id = @org_id AND external_id = ANY(@external_ids::text[]);
