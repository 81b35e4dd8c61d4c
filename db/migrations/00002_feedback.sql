-- +goose Up
CREATE TYPE feedback_type AS ENUM ('thumbs_up', 'thumbs_down', 'rating', 'correction', 'detailed');
CREATE TYPE review_status AS ENUM ('pending', 'approved', 'rejected', 'needs_correction', 'corrected');
CREATE TYPE feedback_source AS ENUM ('api', 'langfuse', 'file', 'ui');

CREATE TABLE feedback (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Insertion order: a stable tie-breaker for "the first" of duplicates.
    seq             bigint GENERATED ALWAYS AS IDENTITY,
    org_id          uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    external_id     text,
    session_id      text NOT NULL DEFAULT '',
    trace_id        text NOT NULL DEFAULT '',
    end_user_id     text NOT NULL DEFAULT '',
    query           text NOT NULL,
    response        text NOT NULL,
    context         jsonb NOT NULL DEFAULT '{}',
    model           text NOT NULL DEFAULT '',
    experiment_arm  text NOT NULL DEFAULT '',
    feedback_type   feedback_type NOT NULL,
    rating          smallint CHECK (rating BETWEEN 1 AND 5),
    dim_accuracy    smallint CHECK (dim_accuracy BETWEEN 1 AND 5),
    dim_helpfulness smallint CHECK (dim_helpfulness BETWEEN 1 AND 5),
    dim_clarity     smallint CHECK (dim_clarity BETWEEN 1 AND 5),
    dim_safety      smallint CHECK (dim_safety BETWEEN 1 AND 5),
    comment         text NOT NULL DEFAULT '',
    correction      text NOT NULL DEFAULT '',
    latency_ms      integer CHECK (latency_ms >= 0),
    tags            text[] NOT NULL DEFAULT '{}',
    status          review_status NOT NULL DEFAULT 'pending',
    assignee_id     uuid REFERENCES users (id) ON DELETE SET NULL,
    reviewer_id     uuid REFERENCES users (id) ON DELETE SET NULL,
    reviewed_at     timestamptz,
    source          feedback_source NOT NULL,
    -- Sibling rank among candidate answers to one prompt (0 = best), and the
    -- key of that group, kept for turning ranks into preference pairs.
    rank            smallint,
    rank_group      text NOT NULL DEFAULT '',
    pii_kinds       text[] NOT NULL DEFAULT '{}',
    content_hash    bytea NOT NULL,
    duplicate_of    uuid REFERENCES feedback (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    version         integer NOT NULL DEFAULT 1
);

-- The words of an item for full-text search. An expression index rather
-- than a stored column: rows stay small and RETURNING does not carry it.
-- +goose StatementBegin
CREATE FUNCTION feedback_document(query text, response text, comment text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_tsvector('english'::regconfig, left(query, 100000) || ' ' || left(response, 100000) || ' ' || left(comment, 20000));
-- +goose StatementEnd

CREATE UNIQUE INDEX feedback_external_id_key ON feedback (org_id, external_id) WHERE external_id IS NOT NULL;
-- The queue: newest first, keyset-paginated, usually narrowed by status.
CREATE INDEX feedback_org_created_idx ON feedback (org_id, created_at DESC, id DESC);
CREATE INDEX feedback_org_status_created_idx ON feedback (org_id, status, created_at DESC, id DESC);
CREATE INDEX feedback_org_assignee_idx ON feedback (org_id, assignee_id, created_at DESC, id DESC) WHERE assignee_id IS NOT NULL;
CREATE INDEX feedback_org_model_idx ON feedback (org_id, model, created_at DESC);
CREATE INDEX feedback_org_hash_idx ON feedback (org_id, content_hash, seq);
CREATE INDEX feedback_tags_idx ON feedback USING gin (tags);
CREATE INDEX feedback_search_idx ON feedback USING gin (feedback_document(query, response, comment));
CREATE INDEX feedback_pii_idx ON feedback (org_id, created_at DESC) WHERE pii_kinds <> '{}';
CREATE INDEX feedback_rank_group_idx ON feedback (org_id, rank_group) WHERE rank_group <> '';

-- Every review action on an item: the item's history.
CREATE TABLE feedback_reviews (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    feedback_id uuid NOT NULL REFERENCES feedback (id) ON DELETE CASCADE,
    actor_id    uuid,
    actor_label text NOT NULL,
    action      text NOT NULL,
    from_status review_status,
    to_status   review_status,
    note        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX feedback_reviews_item_idx ON feedback_reviews (feedback_id, id);
CREATE INDEX feedback_reviews_org_actor_idx ON feedback_reviews (org_id, actor_id, created_at);

-- +goose Down
DROP TABLE feedback_reviews;
DROP TABLE feedback;
DROP FUNCTION feedback_document;
DROP TYPE feedback_source;
DROP TYPE review_status;
DROP TYPE feedback_type;
