-- name: FeedbackQueueKnownIDs :many
-- The ids among a bulk selection that belong to the organisation, so a
-- selection is counted and confirmed by what it really holds.
SELECT id FROM feedback WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- name: FeedbackQueueModels :many
-- The organisation's model names for the queue's filter. A skip scan over
-- feedback_org_model_idx: one index probe per distinct model, so it stays
-- quick however many items there are.
WITH RECURSIVE models AS (
    (SELECT f.model FROM feedback f WHERE f.org_id = @org_id AND f.model > '' ORDER BY f.model LIMIT 1)
    UNION ALL
    SELECT (SELECT f.model FROM feedback f WHERE f.org_id = @org_id AND f.model > m.model ORDER BY f.model LIMIT 1)
    FROM models m
    WHERE m.model IS NOT NULL
)
SELECT model::text FROM models WHERE model IS NOT NULL LIMIT 200;
