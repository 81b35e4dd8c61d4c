-- +goose Up
-- Teams: named groups of curators that routing rules hand work to.
CREATE TABLE teams (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id     uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (length(btrim(name)) > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name)
);

-- A member's tags are the items they take under a rule that routes by tag.
CREATE TABLE team_members (
    team_id  uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    org_id   uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    tags     text[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (team_id, user_id)
);

-- A routing rule assigns new, unassigned, pending items its queue filter
-- matches to its curators (or its team's), in turn or by tag, never giving
-- a curator more than cap items still to review. Rules are tried in
-- position order; an item goes to the first rule that places it.
CREATE TABLE routing_rules (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (length(btrim(name)) > 0),
    -- The queue filter as query parameters (internal/feedback.Filter).
    filter           text NOT NULL DEFAULT '',
    mode             text NOT NULL CHECK (mode IN ('round_robin', 'by_tag')),
    team_id          uuid REFERENCES teams (id) ON DELETE RESTRICT,
    cap              integer NOT NULL CHECK (cap BETWEEN 1 AND 100000),
    position         integer NOT NULL DEFAULT 0,
    active           boolean NOT NULL DEFAULT true,
    -- The curator who took the last item, for round-robin.
    last_user_id     uuid,
    routed           bigint NOT NULL DEFAULT 0,
    created_by_label text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name)
);
CREATE INDEX routing_rules_org_idx ON routing_rules (org_id, position, created_at) WHERE active;

-- The curators a rule names itself (a rule names curators or a team).
CREATE TABLE routing_rule_curators (
    rule_id  uuid NOT NULL REFERENCES routing_rules (id) ON DELETE CASCADE,
    org_id   uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    tags     text[] NOT NULL DEFAULT '{}',
    position integer NOT NULL,
    PRIMARY KEY (rule_id, user_id)
);

-- +goose Down
DROP TABLE routing_rule_curators;
DROP TABLE routing_rules;
DROP TABLE team_members;
DROP TABLE teams;
