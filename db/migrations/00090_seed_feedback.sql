-- +goose Up
-- Feedback in the seeds' shapes. Seed 001's reaction_type has a third
-- value besides the thumbs, "neutral": a reaction that is neither.
ALTER TYPE feedback_type ADD VALUE IF NOT EXISTS 'neutral';

-- Seed 004's curator_email: the organisation's user who gave the
-- feedback (a curator trying the assistant), as against the end user of
-- end_user_id. created_at is when the feedback was given, which history
-- brought in from elsewhere sends; the queue, stats, alerts and monitors
-- read it.
ALTER TABLE feedback ADD COLUMN given_by uuid REFERENCES users (id) ON DELETE SET NULL;

-- +goose Down
ALTER TABLE feedback DROP COLUMN given_by;
-- A value cannot leave an enum type; neutral reactions read as detailed
-- feedback before it, and the value stays unused.
UPDATE feedback SET feedback_type = 'detailed' WHERE feedback_type = 'neutral';
