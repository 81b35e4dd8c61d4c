-- +goose Up
-- Assigning one unit looks its first exposure up by the primary key in a
-- function planned with sequential scans off, as feedback_first_id does
-- (migration 00105): a connection keeps the plan it made for
-- ExposureInsertAssignedOne, and one made while experiment_exposures was
-- nearly empty read the whole table for each unit once it had grown with
-- no ANALYZE between.
-- +goose StatementBegin
CREATE FUNCTION experiment_exposure_arm(p_experiment_id uuid, p_phase integer, p_unit_id text) RETURNS integer
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $fn$
BEGIN
    RETURN (SELECT x.arm FROM experiment_exposures x WHERE x.experiment_id = p_experiment_id AND x.phase = p_phase AND x.unit_id = p_unit_id);
END
$fn$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION experiment_exposure_arm(uuid, integer, text);
