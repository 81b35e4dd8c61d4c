-- +goose Up
-- The partition maintenance raced the writers it runs beside:
--   * month_partition_ensure copied a month's rows out of the DEFAULT
--     partition, then deleted them there. A row a transaction changed
--     between the copy and the delete was deleted in its new version
--     after the copy had taken its old one (the change was lost), and a
--     row moved into DEFAULT after the copy was deleted without a copy;
--   * feedback_partitions_maintain dropped an old month's partition when
--     it looked empty, while a transaction not yet committed could be
--     putting rows into it (the rows went with the table, their keys
--     stayed: a judge conflict then pointed at feedback that was gone).
-- Each now first takes the partition in SHARE ROW EXCLUSIVE mode, which
-- waits for the transactions writing there and holds off new ones until
-- it commits (readers go on), and the move is one statement: what the
-- delete removed is what is inserted.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION month_partition_ensure(p_parent text, p_key text, p_at timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    m_start timestamp := date_trunc('month', p_at AT TIME ZONE 'UTC');
    m_from timestamptz := m_start AT TIME ZONE 'UTC';
    m_to timestamptz := (m_start + interval '1 month') AT TIME ZONE 'UTC';
    m_name text := p_parent || '_y' || to_char(m_start, 'YYYY') || 'm' || to_char(m_start, 'MM');
BEGIN
    IF to_regclass(m_name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('LOCK TABLE %I IN SHARE ROW EXCLUSIVE MODE', p_parent || '_default');
    -- Another run may have made it while this one waited for the lock.
    IF to_regclass(m_name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', m_name, p_parent);
    -- The rows move as they are: the feedback triggers leave their keys be.
    PERFORM set_config('curate.partition_move', 'on', true);
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= $1 AND %I < $2 RETURNING *) INSERT INTO %I SELECT * FROM moved',
        p_parent || '_default', p_key, p_key, m_name) USING m_from, m_to;
    PERFORM set_config('curate.partition_move', 'off', true);
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', p_parent, m_name, m_from, m_to);
    PERFORM partition_indexes_name(m_name, right(m_name, 8));
    RETURN true;
END
$fn$;
-- +goose StatementEnd

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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION month_partition_ensure(p_parent text, p_key text, p_at timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    m_start timestamp := date_trunc('month', p_at AT TIME ZONE 'UTC');
    m_from timestamptz := m_start AT TIME ZONE 'UTC';
    m_to timestamptz := (m_start + interval '1 month') AT TIME ZONE 'UTC';
    m_name text := p_parent || '_y' || to_char(m_start, 'YYYY') || 'm' || to_char(m_start, 'MM');
BEGIN
    IF to_regclass(m_name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', m_name, p_parent);
    -- The rows move as they are: the feedback triggers leave their keys be.
    PERFORM set_config('curate.partition_move', 'on', true);
    EXECUTE format('INSERT INTO %I SELECT * FROM %I WHERE %I >= $1 AND %I < $2', m_name, p_parent || '_default', p_key, p_key)
        USING m_from, m_to;
    EXECUTE format('DELETE FROM %I WHERE %I >= $1 AND %I < $2', p_parent || '_default', p_key, p_key) USING m_from, m_to;
    PERFORM set_config('curate.partition_move', 'off', true);
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', p_parent, m_name, m_from, m_to);
    PERFORM partition_indexes_name(m_name, right(m_name, 8));
    RETURN true;
END
$fn$;
-- +goose StatementEnd

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
