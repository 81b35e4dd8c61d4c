-- +goose Up
-- A frozen version's validation report for one format, PII setting and
-- base model. A frozen version never changes, so its report is computed
-- once (by a job queued when the version is frozen, or by the first report
-- or export that needs it) and read back by every later report, export and
-- fine-tuning launch. validator is the rules' revision
-- (validate.Revision): a report made under older rules is computed again.
CREATE TABLE dataset_version_reports (
    version_id uuid NOT NULL REFERENCES dataset_versions (id) ON DELETE CASCADE,
    format     text NOT NULL,
    mask_pii   boolean NOT NULL,
    base_model text NOT NULL,
    validator  integer NOT NULL,
    report     jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (version_id, format, mask_pii, base_model, validator)
);

-- +goose Down
DROP TABLE dataset_version_reports;
