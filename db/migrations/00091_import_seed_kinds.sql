-- +goose Up
-- Files of the seeds' feedback records: seed 001's feedback_data and seed
-- 004's rlhf_feedback rows.
ALTER TABLE import_runs DROP CONSTRAINT import_runs_kind_check;
ALTER TABLE import_runs ADD CONSTRAINT import_runs_kind_check
    CHECK (kind IN ('jsonl', 'oasst', 'seed001', 'seed004', 'hh-rlhf', 'oasst-pairs', 'trl', 'openai-preference'));

-- +goose Down
DELETE FROM import_runs WHERE kind IN ('seed001', 'seed004');
ALTER TABLE import_runs DROP CONSTRAINT import_runs_kind_check;
ALTER TABLE import_runs ADD CONSTRAINT import_runs_kind_check
    CHECK (kind IN ('jsonl', 'oasst', 'hh-rlhf', 'oasst-pairs', 'trl', 'openai-preference'));
