-- +goose Up
-- Reward formulas: named, versioned sets of signed weights that combine an
-- evaluation's scores into one reward (R = 0.35·chain + 0.25·emergency −
-- 0.15·risk + 0.25·judge). A version never changes once written: a report
-- names the version it used, and that must keep meaning the same weights.
-- A change is a new version.
CREATE TABLE reward_formulas (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    version          integer NOT NULL CHECK (version >= 1),
    -- [{"scorer": "chain", "weight": 0.35}, ...]: an array, because the
    -- order the user gave is the order the formula is written in, and a
    -- jsonb object would not keep it.
    weights          jsonb NOT NULL CHECK (jsonb_typeof(weights) = 'array' AND jsonb_array_length(weights) > 0),
    created_by       uuid REFERENCES users (id) ON DELETE SET NULL,
    created_by_label text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name, version),
    UNIQUE (org_id, id)
);

-- Updates are refused; deletes are left to the organisation's cascade.
-- +goose StatementBegin
CREATE FUNCTION reward_formulas_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reward formula versions are immutable: write a new version'
        USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER reward_formulas_no_update BEFORE UPDATE ON reward_formulas
    FOR EACH ROW EXECUTE FUNCTION reward_formulas_immutable();

-- +goose Down
DROP TABLE reward_formulas;
DROP FUNCTION reward_formulas_immutable();
