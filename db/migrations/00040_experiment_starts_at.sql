-- +goose Up
-- An experiment's planned start, beside its planned end (ends_at): the
-- window it is meant to run in. Starting it stays an admin's step.
ALTER TABLE experiments ADD COLUMN starts_at timestamptz,
    ADD CONSTRAINT experiments_schedule_check CHECK (starts_at IS NULL OR ends_at IS NULL OR ends_at > starts_at);

-- +goose Down
ALTER TABLE experiments DROP CONSTRAINT experiments_schedule_check, DROP COLUMN starts_at;
