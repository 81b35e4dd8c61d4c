-- +goose Up
-- Browser sessions, one row per signed-in browser. The cookie carries a
-- random token and only its sha256 is kept here, so reading this table
-- signs nobody in. Every page request reads its row: deleting rows ends
-- sessions on every server at once (sign-out, sign-out everywhere, a
-- password or role change, deactivation).
CREATE TABLE sessions (
    id           bytea PRIMARY KEY CHECK (length(id) = 32),
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    org_id       uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    user_agent   text NOT NULL DEFAULT '' CHECK (length(user_agent) <= 300),
    ip           text NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user_idx ON sessions (user_id, last_seen_at);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);

-- +goose Down
DROP TABLE sessions;
