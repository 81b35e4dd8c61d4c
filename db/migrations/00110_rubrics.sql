-- +goose Up
-- Review rubrics: the questions a team asks of an item (label, labels,
-- rating, ranking, text, span), with guidelines, versioned: editing a
-- rubric adds a version, and an answer records the version it answered.
CREATE TABLE rubrics (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL,
    version          integer NOT NULL DEFAULT 1,
    applies_tags     text[] NOT NULL DEFAULT '{}',
    created_by_label text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name),
    UNIQUE (org_id, id)
);

CREATE TABLE rubric_versions (
    org_id           uuid NOT NULL,
    rubric_id        uuid NOT NULL,
    version          integer NOT NULL CHECK (version >= 1),
    name             text NOT NULL,
    guidelines       text NOT NULL DEFAULT '',
    questions        jsonb NOT NULL,
    applies_tags     text[] NOT NULL DEFAULT '{}',
    created_by_label text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (rubric_id, version),
    FOREIGN KEY (org_id, rubric_id) REFERENCES rubrics (org_id, id) ON DELETE CASCADE
);

-- One answer per item, rubric and reviewer (a user, an API key, or the
-- adjudicator's decision), replaced when answered again.
CREATE TABLE rubric_answers (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id         uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    feedback_id    uuid NOT NULL REFERENCES feedback (id) ON DELETE CASCADE,
    rubric_id      uuid NOT NULL,
    rubric_version integer NOT NULL,
    reviewer_key   text NOT NULL,
    reviewer_id    uuid REFERENCES users (id) ON DELETE SET NULL,
    reviewer_label text NOT NULL DEFAULT '',
    adjudicated    boolean NOT NULL DEFAULT false,
    answers        jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (feedback_id, rubric_id, reviewer_key),
    FOREIGN KEY (rubric_id, rubric_version) REFERENCES rubric_versions (rubric_id, version) ON DELETE CASCADE
);
CREATE INDEX rubric_answers_rubric_idx ON rubric_answers (org_id, rubric_id, feedback_id);

-- +goose Down
DROP TABLE rubric_answers;
DROP TABLE rubric_versions;
DROP TABLE rubrics;
