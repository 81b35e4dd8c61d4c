-- +goose Up
-- Golden sets: frozen dataset versions marked as evaluation sets. Their
-- items are the prompts an evaluation asks and the reference answers it
-- compares with; split_tags name the tags that make a split of their own
-- (the seed's gold_set and red_team), so a red-team split is reported
-- apart.
CREATE TABLE golden_sets (
    version_id       uuid PRIMARY KEY REFERENCES dataset_versions (id) ON DELETE CASCADE,
    org_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    split_tags       text[] NOT NULL DEFAULT '{}',
    created_by_label text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX golden_sets_org ON golden_sets (org_id, created_at DESC);

-- +goose Down
DROP TABLE golden_sets;
