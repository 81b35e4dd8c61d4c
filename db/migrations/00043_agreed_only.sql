-- +goose Up
-- A dataset can take agreed items only: members whose overlapping review
-- is still open or disputed are left out of what it freezes and checks,
-- and a version keeps how many were left out, for its report.
ALTER TABLE training_datasets ADD COLUMN agreed_only boolean NOT NULL DEFAULT false;
ALTER TABLE dataset_versions
    ADD COLUMN left_out_disputed integer NOT NULL DEFAULT 0,
    ADD COLUMN left_out_open integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE dataset_versions DROP COLUMN left_out_open, DROP COLUMN left_out_disputed;
ALTER TABLE training_datasets DROP COLUMN agreed_only;
