-- +goose Up
-- Overlapping review: a plan asks for k independent reviews of every item
-- a queue filter selects (a tag, a dataset's members, any filter). Items
-- no plan covers keep the single review of the queue: nothing here is read
-- on the queue's own pages.
CREATE TYPE review_state AS ENUM ('open', 'agreed', 'disputed', 'adjudicated');

CREATE TABLE review_plans (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id              uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name                text NOT NULL CHECK (length(btrim(name)) > 0),
    overlap             smallint NOT NULL CHECK (overlap BETWEEN 2 AND 10),
    -- The queue filter as query parameters, to show and to link to ...
    filter              text NOT NULL DEFAULT '',
    -- ... and the same filter as feedback_matches takes it, so that one
    -- statement can ask which plans cover an item.
    status              review_status,
    feedback_type       feedback_type,
    source              feedback_source,
    rating_min          int NOT NULL DEFAULT 0,
    rating_max          int NOT NULL DEFAULT 0,
    dim_below           int NOT NULL DEFAULT 0,
    tag                 text NOT NULL DEFAULT '',
    model               text NOT NULL DEFAULT '',
    assignee_id         uuid,
    created_from        timestamptz,
    created_to          timestamptz,
    with_duplicates     boolean NOT NULL DEFAULT false,
    pii_only            boolean NOT NULL DEFAULT false,
    q                   text NOT NULL DEFAULT '',
    dataset_id          uuid,
    safety_only         boolean NOT NULL DEFAULT false,
    -- The disagreement rules: ratings (and each rated dimension) further
    -- apart than the tolerance disagree; statuses always must match; tags
    -- only when asked.
    rating_tolerance    smallint NOT NULL DEFAULT 1 CHECK (rating_tolerance BETWEEN 0 AND 4),
    dimension_tolerance smallint NOT NULL DEFAULT 1 CHECK (dimension_tolerance BETWEEN 0 AND 4),
    tags_must_match     boolean NOT NULL DEFAULT false,
    active              boolean NOT NULL DEFAULT true,
    created_by_label    text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    ended_at            timestamptz
);
CREATE INDEX review_plans_org_idx ON review_plans (org_id, created_at DESC, id DESC);

-- One row per item a plan has started: how many reviews it asks for, how
-- many are taken and submitted, and where the item stands. assigned never
-- passes overlap: "next item" raises it in one statement that checks it.
CREATE TABLE review_items (
    feedback_id    uuid PRIMARY KEY REFERENCES feedback (id) ON DELETE CASCADE,
    org_id         uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    plan_id        uuid NOT NULL REFERENCES review_plans (id) ON DELETE CASCADE,
    overlap        smallint NOT NULL,
    assigned       smallint NOT NULL DEFAULT 0,
    submitted      smallint NOT NULL DEFAULT 0,
    state          review_state NOT NULL DEFAULT 'open',
    -- The label kinds the reviewers disagree on (status, rating, ...).
    disagreements  text[] NOT NULL DEFAULT '{}',
    decided_by     uuid REFERENCES users (id) ON DELETE SET NULL,
    decided_label  text NOT NULL DEFAULT '',
    decision_note  text NOT NULL DEFAULT '',
    decided_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CHECK (assigned BETWEEN 0 AND overlap),
    CHECK (submitted BETWEEN 0 AND assigned)
);
CREATE INDEX review_items_plan_idx ON review_items (plan_id, state, assigned);
CREATE INDEX review_items_disputed_idx ON review_items (org_id, updated_at, feedback_id) WHERE state IN ('disputed', 'adjudicated');

-- Each reviewer's own label of an item, kept apart from everyone else's: a
-- row is the reviewer's assignment until submitted_at is set.
CREATE TABLE review_labels (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id          uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    feedback_id     uuid NOT NULL REFERENCES review_items (feedback_id) ON DELETE CASCADE,
    plan_id         uuid NOT NULL REFERENCES review_plans (id) ON DELETE CASCADE,
    reviewer_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    assigned_at     timestamptz NOT NULL DEFAULT now(),
    submitted_at    timestamptz,
    status          review_status,
    rating          smallint CHECK (rating BETWEEN 1 AND 5),
    dim_accuracy    smallint CHECK (dim_accuracy BETWEEN 1 AND 5),
    dim_helpfulness smallint CHECK (dim_helpfulness BETWEEN 1 AND 5),
    dim_clarity     smallint CHECK (dim_clarity BETWEEN 1 AND 5),
    dim_safety      smallint CHECK (dim_safety BETWEEN 1 AND 5),
    tags            text[] NOT NULL DEFAULT '{}',
    correction      text NOT NULL DEFAULT '',
    note            text NOT NULL DEFAULT '',
    UNIQUE (feedback_id, reviewer_id),
    CHECK (submitted_at IS NULL OR status IS NOT NULL)
);
CREATE INDEX review_labels_open_idx ON review_labels (org_id, reviewer_id, plan_id) WHERE submitted_at IS NULL;
CREATE INDEX review_labels_submitted_idx ON review_labels (org_id, submitted_at DESC) WHERE submitted_at IS NOT NULL;

-- The senior curators who decide disputed items, besides the admins.
CREATE TABLE review_adjudicators (
    org_id         uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    added_by_label text NOT NULL DEFAULT '',
    added_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, user_id)
);

-- Whether an item's overlapping review is settled: never started, agreed
-- or adjudicated, or left open by a plan that has ended. Disputed items,
-- and open ones of an active plan, are not yet training material for
-- datasets, pair generation and collect steps that ask for agreed items
-- only.
-- +goose StatementBegin
CREATE FUNCTION review_settled(feedback_id uuid) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN NOT EXISTS (SELECT 1 FROM review_items r JOIN review_plans p ON p.id = r.plan_id
                   WHERE r.feedback_id = review_settled.feedback_id
                     AND (r.state = 'disputed' OR (r.state = 'open' AND p.active)));
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION review_settled;
DROP TABLE review_adjudicators;
DROP TABLE review_labels;
DROP TABLE review_items;
DROP TABLE review_plans;
DROP TYPE review_state;
