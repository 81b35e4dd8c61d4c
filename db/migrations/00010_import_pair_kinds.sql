-- +goose Up
-- Pair files (HH-RLHF, OpenAssistant ranked siblings, TRL and OpenAI
-- preference files) are imported through runs too; a pair run's stored,
-- duplicates and skipped count pairs.
ALTER TABLE import_runs DROP CONSTRAINT import_runs_kind_check;
ALTER TABLE import_runs ADD CONSTRAINT import_runs_kind_check
    CHECK (kind IN ('jsonl', 'oasst', 'hh-rlhf', 'oasst-pairs', 'trl', 'openai-preference'));

-- +goose Down
DELETE FROM import_runs WHERE kind NOT IN ('jsonl', 'oasst');
ALTER TABLE import_runs DROP CONSTRAINT import_runs_kind_check;
ALTER TABLE import_runs ADD CONSTRAINT import_runs_kind_check CHECK (kind IN ('jsonl', 'oasst'));
