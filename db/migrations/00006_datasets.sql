-- +goose Up
CREATE TYPE dataset_type AS ENUM ('preference_pairs', 'instruction_tuning', 'dpo');
CREATE TYPE dataset_status AS ENUM ('draft', 'curating', 'ready', 'exported', 'archived');
CREATE TYPE split_strategy AS ENUM ('random', 'temporal', 'user');
CREATE TYPE export_status AS ENUM ('queued', 'running', 'succeeded', 'failed');

-- Curated training datasets (the seed's training_datasets). Members are
-- preference pairs (preference_pairs, dpo) or approved and corrected
-- feedback (instruction_tuning); freezing copies them into a version.
CREATE TABLE training_datasets (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id             uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name               text NOT NULL CHECK (length(btrim(name)) > 0),
    description        text NOT NULL DEFAULT '',
    dataset_type       dataset_type NOT NULL,
    status             dataset_status NOT NULL DEFAULT 'draft',
    -- Default system prompt for examples that carry none of their own.
    system_prompt      text NOT NULL DEFAULT '',
    -- The format and base model the dataset is meant for: the defaults of
    -- the validation report and the export form.
    export_format      text NOT NULL,
    base_model         text NOT NULL DEFAULT '',
    split_strategy     split_strategy NOT NULL DEFAULT 'random',
    validation_percent smallint NOT NULL DEFAULT 20 CHECK (validation_percent BETWEEN 0 AND 50),
    split_seed         bigint NOT NULL DEFAULT 42,
    -- The filter last used to add members (query parameters), kept so the
    -- same selection can be applied again.
    saved_filter       text NOT NULL DEFAULT '',
    quality_score      real,
    current_version_id uuid,
    created_by         uuid REFERENCES users (id) ON DELETE SET NULL,
    curator_label      text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    version            integer NOT NULL DEFAULT 1
);
CREATE INDEX training_datasets_org_created_idx ON training_datasets (org_id, created_at DESC, id DESC);

-- What a dataset holds while it is being curated: exactly one of pair_id
-- and feedback_id per row.
CREATE TABLE training_dataset_members (
    dataset_id  uuid NOT NULL REFERENCES training_datasets (id) ON DELETE CASCADE,
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    pair_id     uuid REFERENCES preference_pairs (id) ON DELETE CASCADE,
    feedback_id uuid REFERENCES feedback (id) ON DELETE CASCADE,
    added_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((pair_id IS NULL) <> (feedback_id IS NULL))
);
CREATE UNIQUE INDEX training_dataset_members_pair_key ON training_dataset_members (dataset_id, pair_id) WHERE pair_id IS NOT NULL;
CREATE UNIQUE INDEX training_dataset_members_feedback_key ON training_dataset_members (dataset_id, feedback_id) WHERE feedback_id IS NOT NULL;

-- A frozen version: its items are copies of the members' exported fields,
-- so later edits to pairs or feedback never change it. Rows are never
-- updated once written.
CREATE TABLE dataset_versions (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id             uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    dataset_id         uuid NOT NULL REFERENCES training_datasets (id) ON DELETE CASCADE,
    number             integer NOT NULL,
    -- "sft" or "preference": the kind of example every item holds.
    kind               text NOT NULL,
    -- Hex sha256 over the canonical encoding (see internal/datasets).
    content_hash       text NOT NULL,
    item_count         integer NOT NULL,
    train_count        integer NOT NULL,
    validation_count   integer NOT NULL,
    split_strategy     split_strategy NOT NULL,
    validation_percent smallint NOT NULL,
    split_seed         bigint NOT NULL,
    created_by_label   text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (dataset_id, number)
);
ALTER TABLE training_datasets ADD FOREIGN KEY (current_version_id) REFERENCES dataset_versions (id) ON DELETE SET NULL;

CREATE TABLE dataset_version_items (
    -- Deferred: a version's items are written before its row, whose hash
    -- and counts are known only once every item has been read.
    version_id        uuid NOT NULL REFERENCES dataset_versions (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    -- sha256 of the item's canonical JSON: the items' order, and with the
    -- source id a stable key for keyset reads.
    content_sha       bytea NOT NULL,
    source_id         uuid NOT NULL,
    split             text NOT NULL CHECK (split IN ('train', 'validation')),
    content           jsonb NOT NULL,
    PRIMARY KEY (version_id, content_sha, source_id)
);
CREATE INDEX dataset_version_items_split_idx ON dataset_version_items (version_id, split, content_sha, source_id);

-- One export of a version to a format: files in blob storage under
-- storage_prefix, described by manifest.
CREATE TABLE dataset_exports (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id         uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    dataset_id     uuid NOT NULL REFERENCES training_datasets (id) ON DELETE CASCADE,
    version_id     uuid NOT NULL REFERENCES dataset_versions (id) ON DELETE CASCADE,
    format         text NOT NULL,
    mask_pii       boolean NOT NULL DEFAULT true,
    status         export_status NOT NULL DEFAULT 'queued',
    rows_total     integer NOT NULL,
    rows_done      integer NOT NULL DEFAULT 0,
    storage_prefix text NOT NULL DEFAULT '',
    manifest       jsonb,
    error          text NOT NULL DEFAULT '',
    created_by_label text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz
);
CREATE INDEX dataset_exports_dataset_idx ON dataset_exports (dataset_id, created_at DESC);

-- +goose Down
DROP TABLE dataset_exports;
ALTER TABLE training_datasets DROP COLUMN current_version_id;
DROP TABLE dataset_version_items;
DROP TABLE dataset_versions;
DROP TABLE training_dataset_members;
DROP TABLE training_datasets;
DROP TYPE export_status;
DROP TYPE split_strategy;
DROP TYPE dataset_status;
DROP TYPE dataset_type;
