-- +goose Up
-- Growing a codebook: a token budget per codebook, a trigram index to find
-- near-duplicate rules, and suggestions: rules drafted by the reflector
-- (a judge endpoint asked to turn an expert's correction into a rule),
-- waiting for a curator to accept, edit or dismiss them.
ALTER TABLE codebooks ADD COLUMN budget_tokens integer NOT NULL DEFAULT 2000 CHECK (budget_tokens BETWEEN 50 AND 200000);

CREATE INDEX codebook_rules_content_trgm ON codebook_rules USING gin (content gin_trgm_ops);

CREATE TYPE suggestion_status AS ENUM ('pending', 'ready', 'failed', 'accepted', 'dismissed');

CREATE TABLE codebook_suggestions (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    codebook_id      uuid NOT NULL REFERENCES codebooks (id) ON DELETE CASCADE,
    feedback_id      uuid NOT NULL REFERENCES feedback (id) ON DELETE CASCADE,
    endpoint         text NOT NULL,
    template_version integer NOT NULL,
    status           suggestion_status NOT NULL DEFAULT 'pending',
    section          text NOT NULL DEFAULT '',
    content          text NOT NULL DEFAULT '',
    -- Why a failed suggestion has no rule, in words.
    reason           text NOT NULL DEFAULT '',
    -- What decides the reflector's answer (template, endpoint, item): a
    -- suggestion with the same key is reused, not paid for again.
    cache_key        bytea,
    calls            integer NOT NULL DEFAULT 0,
    cost_micros      bigint NOT NULL DEFAULT 0,
    rule_id          uuid REFERENCES codebook_rules (id) ON DELETE SET NULL,
    created_by_label text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (codebook_id, feedback_id)
);
CREATE INDEX codebook_suggestions_review ON codebook_suggestions (codebook_id, status, created_at);
CREATE INDEX codebook_suggestions_cache ON codebook_suggestions (org_id, cache_key) WHERE status IN ('ready', 'accepted');

-- +goose Down
DROP TABLE codebook_suggestions;
DROP TYPE suggestion_status;
DROP INDEX codebook_rules_content_trgm;
ALTER TABLE codebooks DROP COLUMN budget_tokens;
