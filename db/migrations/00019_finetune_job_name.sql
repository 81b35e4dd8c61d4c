-- +goose Up
-- A job's readable name: its dataset version and its suffix, or "ft-N"
-- for the Nth job trained on that version when it has none, so a list of
-- jobs reads as what was trained rather than as ids. Set once at launch.
ALTER TABLE fine_tuning_jobs ADD COLUMN name text NOT NULL DEFAULT '';
UPDATE fine_tuning_jobs j
SET name = j.dataset_label || ' · ' || COALESCE(NULLIF(j.suffix, ''), 'ft-' || n.seq)
FROM (
    SELECT id, row_number() OVER (PARTITION BY org_id, dataset_version_id ORDER BY created_at, id) AS seq
    FROM fine_tuning_jobs
) n
WHERE n.id = j.id;

-- +goose Down
ALTER TABLE fine_tuning_jobs DROP COLUMN name;
