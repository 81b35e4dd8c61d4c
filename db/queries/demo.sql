-- name: DemoFeedbackUpdateCreatedAt :exec
-- Spreads the demo feedback over past days so the stats have a history.
UPDATE feedback SET created_at = @created_at, updated_at = @created_at WHERE org_id = @org_id AND id = @id;

-- name: DemoFeedbackUpdateReview :exec
UPDATE feedback SET status = @status, reviewer_id = @reviewer_id, reviewed_at = @reviewed_at, version = version + 1
WHERE org_id = @org_id AND id = @id;

-- name: DemoFeedbackReviewInsert :exec
INSERT INTO feedback_reviews (org_id, feedback_id, actor_id, actor_label, action, from_status, to_status, created_at)
VALUES (@org_id, @feedback_id, @actor_id, @actor_label, 'review', 'pending', @to_status, @created_at);
