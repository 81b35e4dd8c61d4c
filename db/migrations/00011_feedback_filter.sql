-- +goose Up
-- The feedback queue's filter, written once: the queue's list, its counts
-- per status, the "all matching" bulk selection and a dataset's saved
-- feedback filter all call it, so they cannot drift apart. It is one SQL
-- expression, STABLE and not STRICT, which Postgres inlines into each
-- calling query (the row's fields become plain column references), so the
-- planner sees the same conditions as if they were written out there and
-- keeps using the queue's indexes. A NULL, 0, '' or false argument leaves
-- its condition out.
--
-- Membership of a dataset needs a sub-select, and Postgres does not inline
-- a function whose body holds one, so it lives in a function of its own,
-- called only for rows that pass the rest when a dataset is named.
-- +goose StatementBegin
CREATE FUNCTION feedback_in_dataset(feedback_id uuid, org_id uuid, dataset_id uuid) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN EXISTS (SELECT 1 FROM training_dataset_members m
               WHERE m.org_id = feedback_in_dataset.org_id AND m.dataset_id = feedback_in_dataset.dataset_id
                 AND m.feedback_id = feedback_in_dataset.feedback_id);
-- +goose StatementEnd

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
    dataset_id uuid
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

-- +goose Down
DROP FUNCTION feedback_matches;
DROP FUNCTION feedback_in_dataset;
