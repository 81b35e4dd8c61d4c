-- +goose Up
-- A user's own settings for how the pages behave, kept on the server so they
-- follow the user from one browser to another. auto_advance: after a review
-- action on an item, open the next item of the queue's filter.
CREATE TABLE user_preferences (
    org_id       uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    auto_advance boolean NOT NULL DEFAULT false,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, user_id)
);

-- +goose Down
DROP TABLE user_preferences;
