-- +goose Up
-- What validating one example alone finds (validate.Facts: its findings,
-- token counts and duplicate keys), stored so that a report reads them
-- instead of checking the example again. Facts depend only on the content
-- and the profile (format, tokenizer, PII checked, rules' revision), so
-- they are keyed by the content's hash: a draft's report fills them in as
-- members arrive, and freezing the same content finds them ready. They
-- are a cache: the hourly maintenance drops those older than 30 days, and
-- a report computes what is missing.
CREATE TABLE item_facts (
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    profile     text NOT NULL,
    content_sha bytea NOT NULL,
    facts       bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, profile, content_sha)
);
CREATE INDEX item_facts_created_idx ON item_facts (created_at);

-- +goose Down
DROP TABLE item_facts;
