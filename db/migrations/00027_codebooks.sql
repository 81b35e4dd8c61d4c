-- +goose Up
-- Codebooks: the fast loop from a correction to a rule the assistant uses
-- the same day. Rules are itemised bullets with helpful/harmful/neutral
-- counters; a published version is an immutable snapshot the assistant is
-- served and retrieves from (full-text and trigram ranking).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TYPE rule_status AS ENUM ('draft', 'active', 'retired');

CREATE TABLE codebooks (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id       uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name)
);

CREATE TABLE codebook_rules (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id              uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    codebook_id         uuid NOT NULL REFERENCES codebooks (id) ON DELETE CASCADE,
    section             text NOT NULL,
    content             text NOT NULL,
    status              rule_status NOT NULL DEFAULT 'draft',
    helpful             integer NOT NULL DEFAULT 0,
    harmful             integer NOT NULL DEFAULT 0,
    neutral             integer NOT NULL DEFAULT 0,
    source_feedback_ids uuid[] NOT NULL DEFAULT '{}',
    -- Bumped by every edit: the If-Match of two curators editing one rule.
    version             integer NOT NULL DEFAULT 1,
    created_by_label    text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX codebook_rules_book ON codebook_rules (codebook_id, status, section);

CREATE TABLE codebook_versions (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id             uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    codebook_id        uuid NOT NULL REFERENCES codebooks (id) ON DELETE CASCADE,
    version            integer NOT NULL,
    -- sha256 of the canonical JSON of its rules (section, content), in
    -- order: an export imported elsewhere publishes the same hash.
    content_hash       text NOT NULL,
    published_by_label text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (codebook_id, version)
);

-- A published version's rules as they were, indexed for retrieval.
CREATE TABLE codebook_version_rules (
    version_id uuid NOT NULL REFERENCES codebook_versions (id) ON DELETE CASCADE,
    position   integer NOT NULL,
    rule_id    uuid NOT NULL,
    section    text NOT NULL,
    content    text NOT NULL,
    search     tsvector GENERATED ALWAYS AS (to_tsvector('english', section || ' ' || content)) STORED,
    PRIMARY KEY (version_id, position)
);
CREATE INDEX codebook_version_rules_search ON codebook_version_rules USING gin (search);

-- A feedback item's use of a rule, counted once.
CREATE TABLE codebook_rule_uses (
    feedback_id uuid NOT NULL REFERENCES feedback (id) ON DELETE CASCADE,
    rule_id     uuid NOT NULL REFERENCES codebook_rules (id) ON DELETE CASCADE,
    outcome     text NOT NULL CHECK (outcome IN ('helpful', 'harmful', 'neutral')),
    PRIMARY KEY (feedback_id, rule_id)
);
CREATE INDEX codebook_rule_uses_rule ON codebook_rule_uses (rule_id);

-- +goose Down
DROP TABLE codebook_rule_uses;
DROP TABLE codebook_version_rules;
DROP TABLE codebook_versions;
DROP TABLE codebook_rules;
DROP TABLE codebooks;
DROP TYPE rule_status;
