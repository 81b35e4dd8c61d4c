-- Review rubrics (migration 00110): each rubric's current version, every
-- version it had, and the answers given to them.

-- name: RubricInsert :one
INSERT INTO rubrics (org_id, name, applies_tags, created_by_label)
VALUES (@org_id, @name, @applies_tags, @created_by_label)
ON CONFLICT (org_id, name) DO NOTHING
RETURNING *;

-- name: RubricGetForUpdate :one
SELECT * FROM rubrics WHERE org_id = @org_id AND id = @id FOR UPDATE;

-- name: RubricUpdateVersion :one
UPDATE rubrics SET version = version + 1, name = @name, applies_tags = @applies_tags, updated_at = now()
WHERE org_id = @org_id AND id = @id
RETURNING *;

-- name: RubricVersionInsert :one
INSERT INTO rubric_versions (org_id, rubric_id, version, name, guidelines, questions, applies_tags, created_by_label)
VALUES (@org_id, @rubric_id, @version, @name, @guidelines, @questions, @applies_tags, @created_by_label)
RETURNING *;

-- name: RubricGet :one
-- A rubric at its current version.
SELECT v.* FROM rubrics r
JOIN rubric_versions v ON v.rubric_id = r.id AND v.version = r.version
WHERE r.org_id = @org_id AND r.id = @id;

-- name: RubricGetVersion :one
SELECT * FROM rubric_versions WHERE org_id = @org_id AND rubric_id = @rubric_id AND version = @version;

-- name: RubricListByOrg :many
-- The organisation's rubrics at their current versions, by name.
SELECT v.* FROM rubrics r
JOIN rubric_versions v ON v.rubric_id = r.id AND v.version = r.version
WHERE r.org_id = @org_id
ORDER BY r.name, r.id
LIMIT @row_limit;

-- name: RubricListForTags :many
-- The rubrics that apply to an item with these tags: those for one of
-- them, and those for every item (no tag given).
SELECT v.* FROM rubrics r
JOIN rubric_versions v ON v.rubric_id = r.id AND v.version = r.version
WHERE r.org_id = @org_id AND (cardinality(r.applies_tags) = 0 OR r.applies_tags && @tags::text[])
ORDER BY r.name, r.id
LIMIT @row_limit;

-- name: RubricAnswerInsertOrUpdate :one
INSERT INTO rubric_answers (org_id, feedback_id, rubric_id, rubric_version, reviewer_key, reviewer_id, reviewer_label, adjudicated, answers)
VALUES (@org_id, @feedback_id, @rubric_id, @rubric_version, @reviewer_key, sqlc.narg('reviewer_id'), @reviewer_label, @adjudicated, @answers)
ON CONFLICT (feedback_id, rubric_id, reviewer_key) DO UPDATE
SET rubric_version = excluded.rubric_version, answers = excluded.answers, reviewer_label = excluded.reviewer_label, updated_at = now()
RETURNING *;

-- name: RubricAnswerListByFeedback :many
SELECT * FROM rubric_answers WHERE org_id = @org_id AND feedback_id = @feedback_id ORDER BY adjudicated, created_at, id;


-- name: RubricAnswerListForAgreement :many
-- A rubric's answers by reviewers (not adjudications) of the items a
-- filter selects, newest first, up to a limit, leaving out items whose
-- overlapping review is still open under an active plan, so that no figure
-- tells a reviewer what the others said before they submit.
SELECT a.feedback_id, a.reviewer_key, a.reviewer_label, a.rubric_version, a.answers, a.updated_at, f.response
FROM rubric_answers a
JOIN feedback f ON f.id = a.feedback_id
LEFT JOIN review_items r ON r.feedback_id = a.feedback_id
LEFT JOIN review_plans p ON p.id = r.plan_id
WHERE a.org_id = @org_id AND a.rubric_id = @rubric_id AND NOT a.adjudicated
  AND NOT (r.state IS NOT NULL AND r.state = 'open' AND p.active)
  AND feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
    @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
    sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
ORDER BY a.updated_at DESC, a.id DESC
LIMIT @row_limit;

-- name: RubricAnswerListForExport :many
-- A batch of a rubric's answers with their items, in id order after a
-- cursor, for the JSON Lines export; items whose overlapping review is
-- still open under an active plan are left out, as agreement leaves them.
SELECT a.id, a.feedback_id, a.rubric_version, a.reviewer_label, a.adjudicated, a.answers, a.updated_at,
       f.query, f.response, f.tags, f.status, f.model
FROM rubric_answers a
JOIN feedback f ON f.id = a.feedback_id
LEFT JOIN review_items r ON r.feedback_id = a.feedback_id
LEFT JOIN review_plans p ON p.id = r.plan_id
WHERE a.org_id = @org_id AND a.rubric_id = @rubric_id AND a.id > @after_id
  AND NOT (r.state IS NOT NULL AND r.state = 'open' AND p.active)
ORDER BY a.id
LIMIT @row_limit;

-- name: RubricAnswerListForBreakdown :many
-- The newest reviewers' answers to a rubric, up to a limit, for the counts
-- of each answer, leaving out items still open under an active plan.
SELECT a.answers
FROM rubric_answers a
LEFT JOIN review_items r ON r.feedback_id = a.feedback_id
LEFT JOIN review_plans p ON p.id = r.plan_id
WHERE a.org_id = @org_id AND a.rubric_id = @rubric_id AND NOT a.adjudicated
  AND NOT (r.state IS NOT NULL AND r.state = 'open' AND p.active)
ORDER BY a.updated_at DESC, a.id DESC
LIMIT @row_limit;

-- name: RubricAnswerListFeedbackByValue :many
-- The items some answer to a rubric's question gave a value (a label, one
-- of several labels, a rating as text), newest first, up to a limit,
-- leaving out items still open under an active plan.
SELECT f.id, left(f.query, 200)::text AS query_preview, f.status, f.created_at, count(*)::int AS answers
FROM rubric_answers a
JOIN feedback f ON f.id = a.feedback_id
LEFT JOIN review_items r ON r.feedback_id = a.feedback_id
LEFT JOIN review_plans p ON p.id = r.plan_id
WHERE a.org_id = @org_id AND a.rubric_id = @rubric_id
  AND NOT (r.state IS NOT NULL AND r.state = 'open' AND p.active)
  AND (a.answers ->> @question::text = @value::text OR a.answers -> @question::text @> jsonb_build_array(@value::text))
-- (id, created_at) is feedback's key, so the item's columns follow from it.
GROUP BY f.id, f.created_at
ORDER BY f.created_at DESC, f.id DESC
LIMIT @row_limit;

-- name: RubricAnswerListFeedbackSettled :many
-- Of the given items, those whose settled answer to a rubric's question
-- holds a value: the adjudicated answer where an adjudicator decided the
-- question, otherwise the reviewers' answer when every reviewer who
-- answered it gave the same one. A labels answer holds a value it
-- includes; a label or a rating holds only itself. Items whose overlapping
-- review is still open under an active plan have no settled answer yet.
SELECT a.feedback_id
FROM rubric_answers a
LEFT JOIN review_items r ON r.feedback_id = a.feedback_id
LEFT JOIN review_plans p ON p.id = r.plan_id
WHERE a.org_id = @org_id AND a.rubric_id = @rubric_id AND a.feedback_id = ANY(@ids::uuid[])
  AND a.answers ? @question::text
  AND NOT (r.state IS NOT NULL AND r.state = 'open' AND p.active)
GROUP BY a.feedback_id
HAVING coalesce(
    (array_agg(a.answers -> @question::text) FILTER (WHERE a.adjudicated))[1],
    CASE WHEN count(DISTINCT a.answers -> @question::text) FILTER (WHERE NOT a.adjudicated) = 1
         THEN (array_agg(a.answers -> @question::text) FILTER (WHERE NOT a.adjudicated))[1] END
  ) @> @value::jsonb
ORDER BY a.feedback_id;

-- name: RubricAnswerListByFeedbackIDs :many
-- Every answer to the organisation's rubrics for a page of items, with the
-- rubric's name, by item, rubric and reviewer (adjudications last), for
-- the settled answers a frozen dataset carries; items whose overlapping
-- review is still open under an active plan are left out.
SELECT a.feedback_id, b.name AS rubric_name, a.adjudicated, a.answers
FROM rubric_answers a
JOIN rubrics b ON b.id = a.rubric_id
LEFT JOIN review_items r ON r.feedback_id = a.feedback_id
LEFT JOIN review_plans p ON p.id = r.plan_id
WHERE a.org_id = @org_id AND a.feedback_id = ANY(@ids::uuid[])
  AND NOT (r.state IS NOT NULL AND r.state = 'open' AND p.active)
ORDER BY a.feedback_id, b.name, a.adjudicated, a.id;
