-- +goose Up
-- An organisation's retention: feedback older than retention_days is
-- removed by the maintenance job, month by month; none keeps it forever.
ALTER TABLE organizations ADD COLUMN retention_days integer CHECK (retention_days BETWEEN 1 AND 36500);

-- A feedback key's delete cascades to the rows that reference it; these
-- lookups by feedback id had no index of their own (each deleted row read
-- the referencing table whole).
CREATE INDEX feedback_duplicate_of_idx ON feedback (duplicate_of) WHERE duplicate_of IS NOT NULL;
CREATE INDEX training_dataset_members_feedback_idx ON training_dataset_members (feedback_id) WHERE feedback_id IS NOT NULL;
CREATE INDEX codebook_suggestions_feedback_idx ON codebook_suggestions (feedback_id);
CREATE INDEX judge_conflicts_feedback_idx ON judge_conflicts (feedback_id) WHERE feedback_id IS NOT NULL;

-- +goose StatementBegin
-- feedback_partitions_maintain keeps the months' partitions: this month's
-- and the next p_ahead months' exist, a month whose rows history put in
-- the DEFAULT partitions gets its own, and a partition of a month before
-- p_empty_before that holds no rows (retention removed them) is dropped.
-- The DEFAULT partitions, and the months' partitions other than those of
-- p_emptied (the months retention just removed rows from), are read only
-- when the statistics say they hold or lack rows. It returns what it did,
-- one row per partition.
CREATE FUNCTION feedback_partitions_maintain(p_ahead integer, p_empty_before timestamptz, p_emptied timestamptz[])
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

-- +goose Down
DROP FUNCTION feedback_partitions_maintain(integer, timestamptz, timestamptz[]);
DROP INDEX judge_conflicts_feedback_idx;
DROP INDEX codebook_suggestions_feedback_idx;
DROP INDEX training_dataset_members_feedback_idx;
DROP INDEX feedback_duplicate_of_idx;
ALTER TABLE organizations DROP COLUMN retention_days;
