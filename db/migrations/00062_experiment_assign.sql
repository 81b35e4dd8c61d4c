-- +goose Up
-- Assignment's one statement (see ExposureInsertAssigned) kept in a
-- function so that its plan is made once per connection: PostgreSQL plans
-- a prepared statement with array parameters afresh on every call, and
-- planning this statement cost more than running it. The plan does not
-- depend on the values: every unit is looked up and inserted by the
-- exposures' primary key.
-- +goose StatementBegin
CREATE FUNCTION experiment_assign(p_experiment_id uuid, p_org_id uuid, p_phase integer, p_unit_ids text[], p_arms integer[],
                                  p_config_version bigint)
RETURNS TABLE (config_version bigint, unit_ids text[], arms integer[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH cfg AS (
        SELECT (e.config_version + (SELECT sum(a.config_version) FROM experiment_arms a WHERE a.experiment_id = e.id))::bigint AS config_version
        FROM experiments e WHERE e.id = p_experiment_id AND e.org_id = p_org_id
    ),
    unit AS (
        SELECT DISTINCT ON (u.unit_id) u.unit_id, u.arm
        FROM (SELECT unnest(p_unit_ids) AS unit_id, unnest(p_arms) AS arm) u
    ),
    -- Each unit looked up by the primary key (LIMIT keeps the lookup from
    -- being planned as a join).
    old AS (
        SELECT unit.unit_id, x.arm FROM unit CROSS JOIN LATERAL (
            SELECT x.arm FROM experiment_exposures x
            WHERE x.experiment_id = p_experiment_id AND x.phase = p_phase AND x.unit_id = unit.unit_id LIMIT 1
        ) x
    ),
    new AS (
        INSERT INTO experiment_exposures AS x (experiment_id, phase, unit_id, arm)
        SELECT p_experiment_id, p_phase, unit.unit_id, unit.arm FROM unit, cfg
        WHERE cfg.config_version = p_config_version AND unit.arm >= 0
          AND NOT EXISTS (SELECT 1 FROM old WHERE old.unit_id = unit.unit_id)
        ON CONFLICT (experiment_id, phase, unit_id) DO UPDATE SET arm = x.arm
        RETURNING x.unit_id, x.arm
    )
    SELECT cfg.config_version, r.unit_ids, r.arms
    FROM cfg, LATERAL (
        SELECT coalesce(array_agg(b.unit_id), '{}')::text[] AS unit_ids, coalesce(array_agg(b.arm), '{}')::integer[] AS arms
        FROM (SELECT old.unit_id, old.arm FROM old UNION ALL SELECT new.unit_id, new.arm FROM new) b
    ) r;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION experiment_assign(uuid, uuid, integer, text[], integer[], bigint);
