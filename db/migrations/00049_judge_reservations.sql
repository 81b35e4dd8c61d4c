-- +goose Up
-- The judge budget is reserved, not checked. Before a judge (or reflector)
-- call is sent it reserves its estimated cost against the month's budget,
-- in one statement that locks the month's row; once answered it settles
-- to what it cost, with the call's log row, in one transaction. Of
-- parallel callers only those that find room left reserve, so together
-- they overshoot the budget by one call's estimate at most.
--
-- judge_spending is an organisation's month: what its settled calls cost
-- (judge_calls' sum, started from it when the month's row is made) and
-- what calls under way hold. A reservation its process never settled (it
-- was killed between the two) expires and is given back.
CREATE TABLE judge_spending (
    org_id          uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- The month's first instant, UTC.
    month           timestamptz NOT NULL,
    spent_micros    bigint NOT NULL DEFAULT 0,
    reserved_micros bigint NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
    PRIMARY KEY (org_id, month)
);

CREATE TABLE judge_reservations (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id     uuid NOT NULL,
    month      timestamptz NOT NULL,
    micros     bigint NOT NULL CHECK (micros >= 0),
    purpose    text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    FOREIGN KEY (org_id, month) REFERENCES judge_spending (org_id, month) ON DELETE CASCADE
);
CREATE INDEX judge_reservations_expiry ON judge_reservations (org_id, expires_at);

-- +goose Down
DROP TABLE judge_reservations;
DROP TABLE judge_spending;
