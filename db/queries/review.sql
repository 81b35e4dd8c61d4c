-- Overlapping review (migration 00042): plans, each reviewer's label,
-- where each item stands, adjudication and the agreement's raw labels.
-- Queries that select items by a plan's filter take it as the queue does,
-- through feedback_matches, so a plan covers exactly what the queue shows.

-- name: ReviewPlanInsert :one
INSERT INTO review_plans (
    org_id, name, overlap, filter, status, feedback_type, source, rating_min, rating_max, dim_below, tag, model,
    assignee_id, created_from, created_to, with_duplicates, pii_only, q, dataset_id, safety_only,
    rating_tolerance, dimension_tolerance, tags_must_match, created_by_label
) VALUES (
    @org_id, @name, @overlap, @filter, sqlc.narg('status'), sqlc.narg('feedback_type'), sqlc.narg('source'), @rating_min, @rating_max,
    @dim_below, @tag, @model, sqlc.narg('assignee_id'), sqlc.narg('created_from'), sqlc.narg('created_to'), @with_duplicates,
    @pii_only, @q, sqlc.narg('dataset_id'), @safety_only, @rating_tolerance, @dimension_tolerance, @tags_must_match, @created_by_label
)
RETURNING *;

-- name: ReviewPlanGet :one
SELECT * FROM review_plans WHERE org_id = @org_id AND id = @id;

-- name: ReviewPlanList :many
-- The organisation's plans, active ones first, newest first.
SELECT * FROM review_plans
WHERE org_id = @org_id
ORDER BY active DESC, created_at DESC, id DESC
LIMIT @row_limit;

-- name: ReviewPlanCountActive :one
SELECT count(*) FROM review_plans WHERE org_id = @org_id AND active;

-- name: ReviewPlanUpdateEnd :one
UPDATE review_plans SET active = false, ended_at = now()
WHERE org_id = @org_id AND id = @id AND active
RETURNING *;

-- name: ReviewPlanGetForItem :one
-- The active plan that covers an item no plan has started yet: the oldest
-- whose filter selects it.
SELECT p.*
FROM feedback f
JOIN review_plans p ON p.org_id = f.org_id AND p.active
WHERE f.org_id = @org_id AND f.id = @feedback_id
  AND feedback_matches(f, p.org_id, p.status, p.feedback_type, p.source, p.rating_min, p.rating_max, p.dim_below, p.tag, p.model,
      p.assignee_id, p.created_from, p.created_to, p.with_duplicates, p.pii_only, p.q, p.dataset_id, p.safety_only)
ORDER BY p.created_at, p.id
LIMIT 1;

-- name: ReviewItemListHeld :many
-- The items among ids that overlapping review holds: their reviews are
-- open under an active plan or disputed, or an active plan covers them and
-- has not started them. Their status is the reviewers' to set.
SELECT f.id
FROM feedback f
LEFT JOIN review_items r ON r.feedback_id = f.id
LEFT JOIN review_plans rp ON rp.id = r.plan_id
WHERE f.org_id = @org_id AND f.id = ANY(@ids::uuid[])
  AND ((r.state = 'open' AND rp.active) OR r.state = 'disputed'
       OR (r.feedback_id IS NULL AND EXISTS (
           SELECT 1 FROM review_plans p
           WHERE p.org_id = f.org_id AND p.active
             AND feedback_matches(f, p.org_id, p.status, p.feedback_type, p.source, p.rating_min, p.rating_max, p.dim_below, p.tag,
                 p.model, p.assignee_id, p.created_from, p.created_to, p.with_duplicates, p.pii_only, p.q, p.dataset_id, p.safety_only))));

-- name: ReviewItemGet :one
SELECT sqlc.embed(r), p.name AS plan_name, p.active AS plan_active, p.rating_tolerance, p.dimension_tolerance, p.tags_must_match
FROM review_items r
JOIN review_plans p ON p.id = r.plan_id
WHERE r.org_id = @org_id AND r.feedback_id = @feedback_id;

-- name: ReviewItemGetForUpdate :one
SELECT * FROM review_items WHERE org_id = @org_id AND feedback_id = @feedback_id FOR UPDATE;

-- name: ReviewListCandidates :many
-- Items a reviewer may take next in a plan, fewest reviews taken first (so
-- the overlap is reached evenly), then oldest first: items of the plan's
-- filter no plan has started, and the plan's open items with a review to
-- spare, leaving out those the reviewer has reviewed or holds.
WITH cand AS (
    SELECT f.id, f.created_at, 0 AS assigned
    FROM feedback f
    WHERE feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
        @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
        sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
        @safety_only::bool)
      AND NOT EXISTS (SELECT 1 FROM review_items r WHERE r.feedback_id = f.id)
    UNION ALL
    SELECT f.id, f.created_at, r.assigned::int
    FROM review_items r
    JOIN feedback f ON f.id = r.feedback_id
    WHERE r.plan_id = @plan_id AND r.state = 'open' AND r.assigned < r.overlap
)
SELECT c.id::uuid AS id, c.assigned::int AS assigned
FROM cand c
WHERE NOT EXISTS (SELECT 1 FROM review_labels l WHERE l.feedback_id = c.id AND l.reviewer_id = @reviewer_id)
ORDER BY c.assigned, c.created_at, c.id
LIMIT @row_limit;

-- name: ReviewItemInsertOrUpdateClaim :one
-- Takes one of an item's reviews for a plan in one statement: starts the
-- item with one taken, or takes one more while fewer than its overlap are
-- taken and the item is the plan's and open. No row: nothing to take.
INSERT INTO review_items (feedback_id, org_id, plan_id, overlap, assigned)
VALUES (@feedback_id, @org_id, @plan_id, @overlap, 1)
ON CONFLICT (feedback_id) DO UPDATE SET assigned = review_items.assigned + 1, updated_at = now()
WHERE review_items.plan_id = excluded.plan_id AND review_items.state = 'open' AND review_items.assigned < review_items.overlap
RETURNING *;

-- name: ReviewLabelInsert :one
-- The reviewer's assignment; nothing when they already have one.
INSERT INTO review_labels (org_id, feedback_id, plan_id, reviewer_id)
VALUES (@org_id, @feedback_id, @plan_id, @reviewer_id)
ON CONFLICT (feedback_id, reviewer_id) DO NOTHING
RETURNING *;

-- name: ReviewLabelGetOpen :one
-- The item a reviewer has taken in a plan and not submitted, if any.
SELECT feedback_id FROM review_labels
WHERE org_id = @org_id AND reviewer_id = @reviewer_id AND plan_id = @plan_id AND submitted_at IS NULL
ORDER BY assigned_at, id
LIMIT 1;

-- name: ReviewLabelGet :one
SELECT * FROM review_labels WHERE org_id = @org_id AND feedback_id = @feedback_id AND reviewer_id = @reviewer_id;

-- name: ReviewLabelUpdateSubmit :one
UPDATE review_labels SET
    submitted_at = now(), status = @status, rating = sqlc.narg('rating'), dim_accuracy = sqlc.narg('dim_accuracy'),
    dim_helpfulness = sqlc.narg('dim_helpfulness'), dim_clarity = sqlc.narg('dim_clarity'), dim_safety = sqlc.narg('dim_safety'),
    tags = @tags, correction = @correction, note = @note
WHERE org_id = @org_id AND feedback_id = @feedback_id AND reviewer_id = @reviewer_id AND submitted_at IS NULL
RETURNING *;

-- name: ReviewLabelDelete :execrows
-- Gives back a review taken and not submitted.
DELETE FROM review_labels
WHERE org_id = @org_id AND feedback_id = @feedback_id AND reviewer_id = @reviewer_id AND submitted_at IS NULL;

-- name: ReviewItemUpdateReleased :one
UPDATE review_items SET assigned = assigned - 1, updated_at = now()
WHERE org_id = @org_id AND feedback_id = @feedback_id AND assigned > submitted
RETURNING *;

-- name: ReviewItemUpdateSubmitted :one
UPDATE review_items SET submitted = submitted + 1, updated_at = now()
WHERE org_id = @org_id AND feedback_id = @feedback_id AND submitted < assigned
RETURNING *;

-- name: ReviewItemUpdateState :one
UPDATE review_items SET state = @state, disagreements = @disagreements, updated_at = now()
WHERE org_id = @org_id AND feedback_id = @feedback_id
RETURNING *;

-- name: ReviewItemUpdateDecision :one
UPDATE review_items SET state = 'adjudicated', decided_by = sqlc.narg('decided_by'), decided_label = @decided_label,
    decision_note = @decision_note, decided_at = now(), updated_at = now()
WHERE org_id = @org_id AND feedback_id = @feedback_id AND state = 'disputed'
RETURNING *;

-- name: ReviewLabelList :many
-- Every label of an item, submitted ones in the order they came in, then
-- the reviews still being written.
SELECT sqlc.embed(l), coalesce(u.email, '')::text AS reviewer_email
FROM review_labels l
LEFT JOIN users u ON u.id = l.reviewer_id
WHERE l.org_id = @org_id AND l.feedback_id = @feedback_id
ORDER BY l.submitted_at NULLS LAST, l.id;

-- name: ReviewLabelListByItems :many
-- The submitted labels of many items, for the adjudication tab.
SELECT sqlc.embed(l), coalesce(u.email, '')::text AS reviewer_email
FROM review_labels l
LEFT JOIN users u ON u.id = l.reviewer_id
WHERE l.org_id = @org_id AND l.feedback_id = ANY(@ids::uuid[]) AND l.submitted_at IS NOT NULL
ORDER BY l.feedback_id, l.submitted_at, l.id;

-- name: FeedbackUpdateSettled :one
-- Sets an item's status (and its correction, when one is given) to what
-- its reviewers agreed or an adjudicator decided.
UPDATE feedback SET
    status = @status, correction = CASE WHEN @set_correction::bool THEN @correction::text ELSE correction END,
    reviewer_id = sqlc.narg('reviewer_id'), reviewed_at = now(), updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id
RETURNING *;

-- name: ReviewItemListDisputed :many
-- Disputed items, oldest dispute first, a page after the cursor.
SELECT r.feedback_id, r.disagreements, r.overlap, r.updated_at, p.name AS plan_name,
       left(f.query, 300)::text AS query_preview, left(f.response, 600)::text AS response_preview
FROM review_items r
JOIN review_plans p ON p.id = r.plan_id
JOIN feedback f ON f.id = r.feedback_id
WHERE r.org_id = @org_id AND r.state = 'disputed'
  AND (sqlc.narg('cursor_time')::timestamptz IS NULL OR (r.updated_at, r.feedback_id) > (sqlc.narg('cursor_time'), sqlc.narg('cursor_id')::uuid))
ORDER BY r.updated_at, r.feedback_id
LIMIT @row_limit;

-- name: ReviewItemListAdjudicated :many
-- Adjudicated items, newest decision first, a page after the cursor.
SELECT r.feedback_id, r.disagreements, r.overlap, r.updated_at, r.decided_label, r.decision_note, r.decided_at,
       p.name AS plan_name, left(f.query, 300)::text AS query_preview, left(f.response, 600)::text AS response_preview,
       f.status AS item_status
FROM review_items r
JOIN review_plans p ON p.id = r.plan_id
JOIN feedback f ON f.id = r.feedback_id
WHERE r.org_id = @org_id AND r.state = 'adjudicated'
  AND (sqlc.narg('cursor_time')::timestamptz IS NULL OR (r.updated_at, r.feedback_id) < (sqlc.narg('cursor_time'), sqlc.narg('cursor_id')::uuid))
ORDER BY r.updated_at DESC, r.feedback_id DESC
LIMIT @row_limit;

-- name: ReviewItemCountDisputed :one
SELECT count(*) FROM review_items WHERE org_id = @org_id AND state = 'disputed';

-- name: ReviewItemCountByPlan :many
-- A plan's started items by reviews submitted and state.
SELECT submitted::int AS submitted, state, count(*) AS count
FROM review_items
WHERE org_id = @org_id AND plan_id = @plan_id
GROUP BY submitted, state;

-- name: ReviewCountUnstarted :one
-- Items a plan's filter selects that no plan has started.
SELECT count(*)
FROM feedback f
WHERE feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
    @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
    sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
  AND NOT EXISTS (SELECT 1 FROM review_items r WHERE r.feedback_id = f.id);

-- name: ReviewLabelListForAgreement :many
-- The submitted labels of the items a filter selects whose reviews are
-- complete (or whose plan has ended), newest first, up to a limit: the
-- ratings agreement is computed from. Items still open are left out, so
-- that no figure tells a reviewer what the others said before they
-- submit.
SELECT l.feedback_id, l.reviewer_id, coalesce(u.email, '')::text AS reviewer_email, l.status, l.rating,
       l.dim_accuracy, l.dim_helpfulness, l.dim_clarity, l.dim_safety, l.tags, l.submitted_at::timestamptz AS submitted_at
FROM review_labels l
JOIN review_items r ON r.feedback_id = l.feedback_id
JOIN review_plans p ON p.id = r.plan_id
JOIN feedback f ON f.id = l.feedback_id
LEFT JOIN users u ON u.id = l.reviewer_id
WHERE l.org_id = @org_id AND l.submitted_at IS NOT NULL AND (r.state <> 'open' OR NOT p.active)
  AND feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
    @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
    sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
ORDER BY l.submitted_at DESC, l.id DESC
LIMIT @row_limit;

-- name: ReviewAdjudicatorList :many
SELECT a.user_id, u.email, a.added_by_label, a.added_at
FROM review_adjudicators a
JOIN users u ON u.id = a.user_id
WHERE a.org_id = @org_id
ORDER BY u.email;

-- name: ReviewAdjudicatorInsert :execrows
INSERT INTO review_adjudicators (org_id, user_id, added_by_label)
SELECT @org_id, u.id, @added_by_label FROM users u WHERE u.org_id = @org_id AND u.id = @user_id
ON CONFLICT DO NOTHING;

-- name: ReviewAdjudicatorDelete :execrows
DELETE FROM review_adjudicators WHERE org_id = @org_id AND user_id = @user_id;

-- name: ReviewAdjudicatorCount :one
-- Whether the user is on the organisation's list of adjudicators.
SELECT count(*) FROM review_adjudicators WHERE org_id = @org_id AND user_id = @user_id;

-- name: DatasetMemberListUnsettled :many
-- The members whose overlapping review is not settled (as review_settled
-- says): feedback that is disputed or open under an active plan, or a pair
-- built from such feedback. disputed says whether any of its items is
-- disputed.
SELECT coalesce(m.pair_id, m.feedback_id)::uuid AS id, bool_or(r.state = 'disputed')::bool AS disputed
FROM training_dataset_members m
LEFT JOIN preference_pairs p ON p.id = m.pair_id
JOIN review_items r ON r.feedback_id IN (m.feedback_id, p.chosen_feedback_id, p.rejected_feedback_id)
JOIN review_plans rp ON rp.id = r.plan_id
WHERE m.dataset_id = @dataset_id AND (r.state = 'disputed' OR (r.state = 'open' AND rp.active))
GROUP BY 1;

-- name: ReviewItemListUnsettled :many
-- The items among ids whose overlapping review is not settled (as
-- review_settled says): disputed, or open under an active plan.
SELECT r.feedback_id, r.state FROM review_items r
JOIN review_plans p ON p.id = r.plan_id
WHERE r.org_id = @org_id AND r.feedback_id = ANY(@ids::uuid[]) AND (r.state = 'disputed' OR (r.state = 'open' AND p.active));
