-- name: FeedbackListKnownIDs :many
-- The ids among a bulk selection that belong to the organisation, so a
-- selection is counted and confirmed by what it really holds.
SELECT id FROM feedback WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);
