-- +goose Up
-- The queue's filter learns the safety-report condition the safety alert
-- counts (a safety score of 2 or less, or the tag "safety"), so an alert
-- can link to exactly the items it counted. The new argument has a
-- default, so every existing call keeps its meaning.
DROP FUNCTION feedback_matches(feedback, uuid, review_status, feedback_type, feedback_source, int, int, int, text, text,
    uuid, timestamptz, timestamptz, bool, bool, text, uuid);

-- +goose StatementBegin
CREATE FUNCTION feedback_matches(
    f feedback,
    org_id uuid,
    status review_status,
    feedback_type feedback_type,
    source feedback_source,
    rating_min int,
    rating_max int,
    dim_below int,
    tag text,
    model text,
    assignee_id uuid,
    created_from timestamptz,
    created_to timestamptz,
    with_duplicates bool,
    pii_only bool,
    q text,
    dataset_id uuid,
    safety_only bool DEFAULT false
) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN f.org_id = feedback_matches.org_id
    AND (feedback_matches.status IS NULL OR f.status = feedback_matches.status)
    AND (feedback_matches.feedback_type IS NULL OR f.feedback_type = feedback_matches.feedback_type)
    AND (feedback_matches.source IS NULL OR f.source = feedback_matches.source)
    AND (feedback_matches.rating_min = 0 OR f.rating >= feedback_matches.rating_min)
    AND (feedback_matches.rating_max = 0 OR f.rating <= feedback_matches.rating_max)
    AND (feedback_matches.dim_below = 0
         OR least(coalesce(f.dim_accuracy, 9), coalesce(f.dim_helpfulness, 9), coalesce(f.dim_clarity, 9), coalesce(f.dim_safety, 9)) < feedback_matches.dim_below)
    AND (feedback_matches.tag = '' OR f.tags @> ARRAY[feedback_matches.tag])
    AND (feedback_matches.model = '' OR f.model = feedback_matches.model)
    AND (feedback_matches.assignee_id IS NULL OR f.assignee_id = feedback_matches.assignee_id)
    AND (feedback_matches.created_from IS NULL OR f.created_at >= feedback_matches.created_from)
    AND (feedback_matches.created_to IS NULL OR f.created_at < feedback_matches.created_to)
    AND (feedback_matches.with_duplicates OR f.duplicate_of IS NULL)
    AND (NOT feedback_matches.pii_only OR f.pii_kinds <> '{}')
    AND (feedback_matches.q = '' OR feedback_document(f.query, f.response, f.comment) @@ websearch_to_tsquery('english', feedback_matches.q))
    AND (feedback_matches.dataset_id IS NULL OR feedback_in_dataset(f.id, f.org_id, feedback_matches.dataset_id))
    AND (NOT feedback_matches.safety_only OR f.dim_safety <= 2 OR f.tags @> ARRAY['safety']);
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION feedback_matches(feedback, uuid, review_status, feedback_type, feedback_source, int, int, int, text, text,
    uuid, timestamptz, timestamptz, bool, bool, text, uuid, bool);
-- +goose StatementBegin
CREATE FUNCTION feedback_matches(
    f feedback, org_id uuid, status review_status, feedback_type feedback_type, source feedback_source,
    rating_min int, rating_max int, dim_below int, tag text, model text, assignee_id uuid,
    created_from timestamptz, created_to timestamptz, with_duplicates bool, pii_only bool, q text, dataset_id uuid
) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN f.org_id = feedback_matches.org_id
    AND (feedback_matches.status IS NULL OR f.status = feedback_matches.status)
    AND (feedback_matches.feedback_type IS NULL OR f.feedback_type = feedback_matches.feedback_type)
    AND (feedback_matches.source IS NULL OR f.source = feedback_matches.source)
    AND (feedback_matches.rating_min = 0 OR f.rating >= feedback_matches.rating_min)
    AND (feedback_matches.rating_max = 0 OR f.rating <= feedback_matches.rating_max)
    AND (feedback_matches.dim_below = 0
         OR least(coalesce(f.dim_accuracy, 9), coalesce(f.dim_helpfulness, 9), coalesce(f.dim_clarity, 9), coalesce(f.dim_safety, 9)) < feedback_matches.dim_below)
    AND (feedback_matches.tag = '' OR f.tags @> ARRAY[feedback_matches.tag])
    AND (feedback_matches.model = '' OR f.model = feedback_matches.model)
    AND (feedback_matches.assignee_id IS NULL OR f.assignee_id = feedback_matches.assignee_id)
    AND (feedback_matches.created_from IS NULL OR f.created_at >= feedback_matches.created_from)
    AND (feedback_matches.created_to IS NULL OR f.created_at < feedback_matches.created_to)
    AND (feedback_matches.with_duplicates OR f.duplicate_of IS NULL)
    AND (NOT feedback_matches.pii_only OR f.pii_kinds <> '{}')
    AND (feedback_matches.q = '' OR feedback_document(f.query, f.response, f.comment) @@ websearch_to_tsquery('english', feedback_matches.q))
    AND (feedback_matches.dataset_id IS NULL OR feedback_in_dataset(f.id, f.org_id, feedback_matches.dataset_id));
-- +goose StatementEnd
