-- +goose Up
-- Experiment exposures are partitioned by month (UTC), as feedback and
-- live scores are (migration 00140), so that retention can remove an old
-- month whole and a phase's reads touch one partition.
--
-- The partition key is the start of the exposure's phase
-- (phase_started_at): it is determined by the experiment and the phase,
-- so the primary key (experiment_id, phase, unit_id, phase_started_at) is
-- as unique as (experiment_id, phase, unit_id) was, and a unit still has
-- one first exposure per phase. A first_seen key would let a unit be
-- recorded once per month. Writers take the value from the experiment's
-- row (experiment_phase_start) in the statement that records the
-- exposure, and record only while that row is at the phase they were
-- given; a phase's start never changes once it runs (a new phase is a new
-- start), and exposures are recorded only while it runs or is paused.
--
-- Rows already stored take their phase's start: the experiment's for its
-- current phase, and the first exposure's time for a phase before it
-- (whose start was not kept).

-- +goose StatementBegin
-- experiment_phase_start is when an experiment's current phase began, the
-- partition key of its exposures: the phase's own start, or the
-- experiment's for its first phase.
CREATE FUNCTION experiment_phase_start(e experiments) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(e.phase_started_at, e.started_at, e.created_at);
-- +goose StatementEnd

ALTER TABLE experiment_exposures RENAME TO experiment_exposures_unpartitioned;
ALTER INDEX experiment_exposures_pkey RENAME TO experiment_exposures_unpartitioned_pkey;
ALTER TABLE experiment_exposures_unpartitioned DROP CONSTRAINT experiment_exposures_experiment_id_fkey;

CREATE TABLE experiment_exposures (
    experiment_id     uuid NOT NULL CONSTRAINT experiment_exposures_experiment_id_fkey REFERENCES experiments (id) ON DELETE CASCADE,
    unit_id           text NOT NULL,
    arm               integer NOT NULL,
    first_seen        timestamptz NOT NULL DEFAULT now(),
    phase             integer NOT NULL DEFAULT 1,
    seen_in_other_arm boolean NOT NULL DEFAULT false,
    -- The phase's start: the partition key.
    phase_started_at  timestamptz NOT NULL
) PARTITION BY RANGE (phase_started_at);
-- +goose StatementBegin
DO $do$
BEGIN
    -- In a block, as in migration 00140: neither table is one the
    -- generated code reads.
    CREATE TABLE experiment_exposures_default PARTITION OF experiment_exposures DEFAULT;
    CREATE TEMPORARY TABLE exposure_phase_starts ON COMMIT DROP AS
    SELECT x.experiment_id, x.phase,
           CASE WHEN x.phase = e.phase THEN experiment_phase_start(e) ELSE min(x.first_seen) END AS phase_started_at
    FROM experiment_exposures_unpartitioned x JOIN experiments e ON e.id = x.experiment_id
    GROUP BY x.experiment_id, x.phase, e.id;
END
$do$;
-- +goose StatementEnd

SELECT month_partition_ensure('experiment_exposures', 'phase_started_at', m)
FROM (SELECT DISTINCT phase_started_at AS m FROM exposure_phase_starts
      UNION SELECT now() + n * interval '1 month' FROM generate_series(0, 2) n) ms;

INSERT INTO experiment_exposures (experiment_id, unit_id, arm, first_seen, phase, seen_in_other_arm, phase_started_at)
SELECT x.experiment_id, x.unit_id, x.arm, x.first_seen, x.phase, x.seen_in_other_arm, s.phase_started_at
FROM experiment_exposures_unpartitioned x
JOIN exposure_phase_starts s ON s.experiment_id = x.experiment_id AND s.phase = x.phase
ORDER BY x.experiment_id, x.phase, x.unit_id;
DROP TABLE experiment_exposures_unpartitioned;

ALTER TABLE experiment_exposures ADD CONSTRAINT experiment_exposures_pkey PRIMARY KEY (experiment_id, phase, unit_id, phase_started_at);
SELECT partition_indexes_name(c.relname, CASE WHEN c.relname LIKE '%\_default' THEN 'default' ELSE right(c.relname, 8) END)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'experiment_exposures'::regclass;

-- +goose StatementBegin
-- experiment_assign (migrations 00062, 00105) records in the phase's
-- partition, and looks units up there only.
CREATE OR REPLACE FUNCTION experiment_assign(p_experiment_id uuid, p_org_id uuid, p_phase integer, p_unit_ids text[], p_arms integer[],
                                             p_config_version bigint)
RETURNS TABLE (config_version bigint, unit_ids text[], arms integer[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH cfg AS (
        SELECT (e.config_version + (SELECT sum(a.config_version) FROM experiment_arms a WHERE a.experiment_id = e.id))::bigint AS config_version,
               -- Only the phase the caller chose under has a start here.
               CASE WHEN e.phase = p_phase THEN experiment_phase_start(e) END AS phase_started_at
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
            WHERE x.experiment_id = p_experiment_id AND x.phase = p_phase AND x.unit_id = unit.unit_id
              AND x.phase_started_at = (SELECT cfg.phase_started_at FROM cfg) LIMIT 1
        ) x
    ),
    new AS (
        INSERT INTO experiment_exposures AS x (experiment_id, phase, unit_id, arm, phase_started_at)
        SELECT p_experiment_id, p_phase, unit.unit_id, unit.arm, cfg.phase_started_at FROM unit, cfg
        WHERE cfg.config_version = p_config_version AND cfg.phase_started_at IS NOT NULL AND unit.arm >= 0
          AND NOT EXISTS (SELECT 1 FROM old WHERE old.unit_id = unit.unit_id)
        ON CONFLICT (experiment_id, phase, unit_id, phase_started_at) DO UPDATE SET arm = x.arm
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

-- +goose StatementBegin
-- experiment_exposure_arm (migrations 00171, 00173) reads the phase's
-- partition only.
CREATE FUNCTION experiment_exposure_arm(p_experiment_id uuid, p_phase integer, p_unit_id text, p_phase_started_at timestamptz) RETURNS integer
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
BEGIN
    RETURN (SELECT x.arm FROM experiment_exposures x
            WHERE x.experiment_id = p_experiment_id AND x.phase = p_phase AND x.unit_id = p_unit_id AND x.phase_started_at = p_phase_started_at);
END
$fn$;
-- +goose StatementEnd
DROP FUNCTION experiment_exposure_arm(uuid, integer, text);

-- +goose StatementBegin
-- experiment_exposure_latest is a unit's exposure in the newest phase it
-- was assigned in, for feedback sent with an experiment's key: a lookup
-- by the primary key in each phase up to the experiment's current one
-- (LIMIT keeps each from being planned as a join). By the experiment and
-- the unit alone, the key's index was read through every unit of the
-- experiment. Planned with sequential scans off, as experiment_exposure_arm
-- is: a plan a connection kept from when a month's partition was empty
-- would read it whole once it filled.
CREATE FUNCTION experiment_exposure_latest(p_experiment_id uuid, p_unit_id text) RETURNS SETOF experiment_exposures
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $fn$
BEGIN
    RETURN QUERY SELECT x.* FROM experiments e
    CROSS JOIN LATERAL generate_series(e.phase, 1, -1) AS p(phase)
    CROSS JOIN LATERAL (
        SELECT * FROM experiment_exposures x WHERE x.experiment_id = e.id AND x.phase = p.phase AND x.unit_id = p_unit_id LIMIT 1
    ) x
    WHERE e.id = p_experiment_id
    ORDER BY x.phase DESC
    LIMIT 1;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
-- feedback_partitions_maintain (migrations 00141, 00174) keeps the
-- exposures' months too.
CREATE OR REPLACE FUNCTION feedback_partitions_maintain(p_ahead integer, p_empty_before timestamptz, p_emptied timestamptz[])
RETURNS TABLE (partition_name text, action text)
LANGUAGE plpgsql AS $fn$
DECLARE
    m timestamptz;
    p record;
    t record;
    empty boolean;
BEGIN
    FOR m IN SELECT now() + n * interval '1 month' FROM generate_series(0, p_ahead) n LOOP
        IF month_partition_ensure('feedback', 'created_at', m) THEN
            partition_name := 'feedback ' || to_char(m AT TIME ZONE 'UTC', 'YYYY-MM'); action := 'created'; RETURN NEXT;
        END IF;
        PERFORM month_partition_ensure('live_scores', 'feedback_at', m);
        PERFORM month_partition_ensure('experiment_exposures', 'phase_started_at', m);
    END LOOP;
    FOR t IN SELECT * FROM (VALUES ('feedback', 'created_at'), ('live_scores', 'feedback_at'), ('experiment_exposures', 'phase_started_at')) v(parent, key) LOOP
        IF coalesce((SELECT s.n_live_tup FROM pg_stat_user_tables s WHERE s.relid = (t.parent || '_default')::regclass), 0) > 0 THEN
            FOR m IN EXECUTE format('SELECT DISTINCT date_trunc(''month'', %I AT TIME ZONE ''UTC'') AT TIME ZONE ''UTC'' FROM %I',
                                    t.key, t.parent || '_default') LOOP
                PERFORM month_partition_ensure(t.parent, t.key, m);
                IF t.parent = 'feedback' THEN
                    partition_name := 'feedback ' || to_char(m AT TIME ZONE 'UTC', 'YYYY-MM'); action := 'split'; RETURN NEXT;
                END IF;
            END LOOP;
        END IF;
    END LOOP;
    FOR p IN
        SELECT c.relname, pc.relname AS parent
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class pc ON pc.oid = i.inhparent
        LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
        WHERE pc.relname IN ('feedback', 'live_scores', 'experiment_exposures') AND c.relname ~ '_y[0-9]{4}m[0-9]{2}$'
          AND make_timestamptz(substr(right(c.relname, 7), 1, 4)::int, right(c.relname, 2)::int, 1, 0, 0, 0, 'UTC')
              + interval '1 month' <= p_empty_before
          -- Only what the statistics say is empty, or retention emptied,
          -- is looked at.
          AND (coalesce(s.n_live_tup, 0) = 0
               OR right(c.relname, 7) IN (SELECT to_char(e AT TIME ZONE 'UTC', 'YYYY"m"MM') FROM unnest(p_emptied) e))
    LOOP
        -- Writers still putting rows in are waited for, and new ones held
        -- off, before it is looked at.
        EXECUTE format('LOCK TABLE %I IN SHARE ROW EXCLUSIVE MODE', p.relname);
        EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %I)', p.relname) INTO empty;
        IF empty THEN
            EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', p.parent, p.relname);
            EXECUTE format('DROP TABLE %I', p.relname);
            partition_name := p.parent || ' ' || right(p.relname, 7); action := 'dropped'; RETURN NEXT;
        END IF;
    END LOOP;
END
$fn$;
-- +goose StatementEnd
ANALYZE experiment_exposures;

-- +goose Down
DROP FUNCTION experiment_exposure_latest(uuid, text);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION feedback_partitions_maintain(p_ahead integer, p_empty_before timestamptz, p_emptied timestamptz[])
RETURNS TABLE (partition_name text, action text)
LANGUAGE plpgsql AS $fn$
DECLARE
    m timestamptz;
    p record;
    empty boolean;
BEGIN
    FOR m IN SELECT now() + n * interval '1 month' FROM generate_series(0, p_ahead) n LOOP
        IF month_partition_ensure('feedback', 'created_at', m) THEN
            partition_name := 'feedback ' || to_char(m AT TIME ZONE 'UTC', 'YYYY-MM'); action := 'created'; RETURN NEXT;
        END IF;
        PERFORM month_partition_ensure('live_scores', 'feedback_at', m);
    END LOOP;
    IF coalesce((SELECT s.n_live_tup FROM pg_stat_user_tables s WHERE s.relid = 'feedback_default'::regclass), 0) > 0 THEN
        FOR m IN SELECT DISTINCT date_trunc('month', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' FROM feedback_default LOOP
            PERFORM month_partition_ensure('feedback', 'created_at', m);
            partition_name := 'feedback ' || to_char(m AT TIME ZONE 'UTC', 'YYYY-MM'); action := 'split'; RETURN NEXT;
        END LOOP;
    END IF;
    IF coalesce((SELECT s.n_live_tup FROM pg_stat_user_tables s WHERE s.relid = 'live_scores_default'::regclass), 0) > 0 THEN
        FOR m IN SELECT DISTINCT date_trunc('month', feedback_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' FROM live_scores_default LOOP
            PERFORM month_partition_ensure('live_scores', 'feedback_at', m);
        END LOOP;
    END IF;
    FOR p IN
        SELECT c.relname, pc.relname AS parent
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class pc ON pc.oid = i.inhparent
        LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
        WHERE pc.relname IN ('feedback', 'live_scores') AND c.relname ~ '_y[0-9]{4}m[0-9]{2}$'
          AND make_timestamptz(substr(right(c.relname, 7), 1, 4)::int, right(c.relname, 2)::int, 1, 0, 0, 0, 'UTC')
              + interval '1 month' <= p_empty_before
          -- Only what the statistics say is empty, or retention emptied,
          -- is looked at.
          AND (coalesce(s.n_live_tup, 0) = 0
               OR right(c.relname, 7) IN (SELECT to_char(e AT TIME ZONE 'UTC', 'YYYY"m"MM') FROM unnest(p_emptied) e))
    LOOP
        -- Writers still putting rows in are waited for, and new ones held
        -- off, before it is looked at.
        EXECUTE format('LOCK TABLE %I IN SHARE ROW EXCLUSIVE MODE', p.relname);
        EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %I)', p.relname) INTO empty;
        IF empty THEN
            EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', p.parent, p.relname);
            EXECUTE format('DROP TABLE %I', p.relname);
            partition_name := p.parent || ' ' || right(p.relname, 7); action := 'dropped'; RETURN NEXT;
        END IF;
    END LOOP;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION experiment_exposure_arm(p_experiment_id uuid, p_phase integer, p_unit_id text) RETURNS integer
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
BEGIN
    RETURN (SELECT x.arm FROM experiment_exposures x WHERE x.experiment_id = p_experiment_id AND x.phase = p_phase AND x.unit_id = p_unit_id);
END
$fn$;
-- +goose StatementEnd
DROP FUNCTION experiment_exposure_arm(uuid, integer, text, timestamptz);

ALTER TABLE experiment_exposures RENAME TO experiment_exposures_partitioned;
ALTER INDEX experiment_exposures_pkey RENAME TO experiment_exposures_partitioned_pkey;
ALTER TABLE experiment_exposures_partitioned DROP CONSTRAINT experiment_exposures_experiment_id_fkey;
CREATE TABLE experiment_exposures (
    experiment_id     uuid NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    unit_id           text NOT NULL,
    arm               integer NOT NULL,
    first_seen        timestamptz NOT NULL DEFAULT now(),
    phase             integer NOT NULL DEFAULT 1,
    seen_in_other_arm boolean NOT NULL DEFAULT false,
    PRIMARY KEY (experiment_id, phase, unit_id)
);
INSERT INTO experiment_exposures (experiment_id, unit_id, arm, first_seen, phase, seen_in_other_arm)
SELECT experiment_id, unit_id, arm, first_seen, phase, seen_in_other_arm FROM experiment_exposures_partitioned;
DROP TABLE experiment_exposures_partitioned;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION experiment_assign(p_experiment_id uuid, p_org_id uuid, p_phase integer, p_unit_ids text[], p_arms integer[],
                                             p_config_version bigint)
RETURNS TABLE (config_version bigint, unit_ids text[], arms integer[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
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
DROP FUNCTION experiment_phase_start(experiments);
