-- +goose Up
-- Assigning one unit now inserts its first exposure first and looks the
-- arm up only when the insert found the unit exposed already (a new unit
-- cost one lookup and one insert before, a known one the lookup alone).
-- The lookup may follow a concurrent assignment of the same unit that the
-- insert waited for, so it must see rows committed since its statement
-- began: VOLATILE gives each of its queries a fresh snapshot.
ALTER FUNCTION experiment_exposure_arm(uuid, integer, text) VOLATILE;

-- +goose Down
ALTER FUNCTION experiment_exposure_arm(uuid, integer, text) STABLE;
