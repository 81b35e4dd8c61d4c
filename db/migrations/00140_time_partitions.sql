-- +goose Up
-- Feedback and live scores are partitioned by month (UTC) of the
-- feedback's created_at, so that a month-bounded read touches one
-- partition and an old month can be removed whole.
--
-- A partitioned table's unique indexes must hold its partition key, so
-- feedback's primary key is (id, created_at) and two guarantees the plain
-- table kept by its own indexes move to feedback_keys, one small row per
-- feedback row, kept by triggers:
--   * feedback ids are unique, whatever the month (feedback_keys' key);
--   * an external id is stored once per organisation
--     (feedback_external_id_key, the same name as before, so a batch's
--     COPY still fails on it by that name). A single insert of an external
--     id already stored stores nothing, as ON CONFLICT DO NOTHING did: the
--     row trigger skips the row.
-- Every foreign key that named feedback (id) names feedback_keys (id) now,
-- with the same ON DELETE action: a feedback row's delete deletes its key,
-- and the key's delete cascades as the feedback row's did.
--
-- Live scores carry the scored feedback's created_at (feedback_at), their
-- partition key: it is determined by the feedback, so (scorer_id,
-- feedback_id, feedback_at) is as unique as (scorer_id, feedback_id) was.
--
-- Rows of a month without its partition land in the DEFAULT partition;
-- month_partition_ensure creates a month's partition, moving that month's
-- rows out of the DEFAULT one. The maintenance job creates the next
-- months ahead and splits what history imports left in DEFAULT.
DROP FUNCTION feedback_matches(feedback, uuid, review_status, feedback_type, feedback_source, int, int, int, text, text,
    uuid, timestamptz, timestamptz, bool, bool, text, uuid, bool);
ALTER TABLE feedback RENAME TO feedback_unpartitioned;
ALTER TABLE live_scores RENAME TO live_scores_unpartitioned;
ALTER TABLE codebook_rule_uses DROP CONSTRAINT codebook_rule_uses_feedback_id_fkey;
ALTER TABLE codebook_suggestions DROP CONSTRAINT codebook_suggestions_feedback_id_fkey;
ALTER TABLE feedback_reviews DROP CONSTRAINT feedback_reviews_feedback_id_fkey;
ALTER TABLE judge_conflicts DROP CONSTRAINT judge_conflicts_feedback_id_fkey;
ALTER TABLE preference_pairs DROP CONSTRAINT preference_pairs_chosen_feedback_id_fkey;
ALTER TABLE preference_pairs DROP CONSTRAINT preference_pairs_rejected_feedback_id_fkey;
ALTER TABLE review_items DROP CONSTRAINT review_items_feedback_id_fkey;
ALTER TABLE training_dataset_members DROP CONSTRAINT training_dataset_members_feedback_id_fkey;
ALTER TABLE rubric_answers DROP CONSTRAINT rubric_answers_feedback_id_fkey;
ALTER TABLE shadow_queries DROP CONSTRAINT shadow_queries_feedback_id_fkey;

CREATE TABLE feedback_keys (
    id          uuid PRIMARY KEY,
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    external_id text,
    created_at  timestamptz NOT NULL
);

CREATE SEQUENCE feedback_seq;
CREATE TABLE feedback (
    id               uuid NOT NULL DEFAULT gen_random_uuid(),
    -- Insertion order: a stable tie-breaker for "the first" of duplicates.
    seq              bigint DEFAULT nextval('feedback_seq'),
    org_id           uuid NOT NULL CONSTRAINT feedback_org_id_fkey REFERENCES organizations (id) ON DELETE CASCADE,
    external_id      text,
    session_id       text NOT NULL DEFAULT '',
    trace_id         text NOT NULL DEFAULT '',
    end_user_id      text NOT NULL DEFAULT '',
    query            text NOT NULL,
    response         text NOT NULL,
    context          jsonb NOT NULL DEFAULT '{}',
    model            text NOT NULL DEFAULT '',
    experiment_arm   text NOT NULL DEFAULT '',
    feedback_type    feedback_type NOT NULL,
    rating           smallint CONSTRAINT feedback_rating_check CHECK (rating BETWEEN 1 AND 5),
    dim_accuracy     smallint CONSTRAINT feedback_dim_accuracy_check CHECK (dim_accuracy BETWEEN 1 AND 5),
    dim_helpfulness  smallint CONSTRAINT feedback_dim_helpfulness_check CHECK (dim_helpfulness BETWEEN 1 AND 5),
    dim_clarity      smallint CONSTRAINT feedback_dim_clarity_check CHECK (dim_clarity BETWEEN 1 AND 5),
    dim_safety       smallint CONSTRAINT feedback_dim_safety_check CHECK (dim_safety BETWEEN 1 AND 5),
    comment          text NOT NULL DEFAULT '',
    correction       text NOT NULL DEFAULT '',
    latency_ms       integer CONSTRAINT feedback_latency_ms_check CHECK (latency_ms >= 0),
    tags             text[] NOT NULL DEFAULT '{}',
    status           review_status NOT NULL DEFAULT 'pending',
    assignee_id      uuid CONSTRAINT feedback_assignee_id_fkey REFERENCES users (id) ON DELETE SET NULL,
    reviewer_id      uuid CONSTRAINT feedback_reviewer_id_fkey REFERENCES users (id) ON DELETE SET NULL,
    reviewed_at      timestamptz,
    source           feedback_source NOT NULL,
    rank             smallint,
    rank_group       text NOT NULL DEFAULT '',
    pii_kinds        text[] NOT NULL DEFAULT '{}',
    content_hash     bytea NOT NULL,
    duplicate_of     uuid CONSTRAINT feedback_duplicate_of_fkey REFERENCES feedback_keys (id) ON DELETE SET NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    version          integer NOT NULL DEFAULT 1,
    experiment_id    uuid,
    is_error         boolean NOT NULL DEFAULT false,
    is_training_data boolean NOT NULL DEFAULT true,
    hygiene_flags    text[] NOT NULL DEFAULT '{}',
    training_set_by  text NOT NULL DEFAULT '',
    given_by         uuid CONSTRAINT feedback_given_by_fkey REFERENCES users (id) ON DELETE SET NULL
) PARTITION BY RANGE (created_at);
ALTER SEQUENCE feedback_seq OWNED BY feedback.seq;

CREATE TABLE live_scores (
    scorer_id   uuid NOT NULL REFERENCES live_scorers (id) ON DELETE CASCADE,
    feedback_id uuid NOT NULL REFERENCES feedback_keys (id) ON DELETE CASCADE,
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'scored', 'invalid', 'skipped')),
    score       double precision CHECK (score >= 0 AND score <= 1),
    safety_flag boolean NOT NULL DEFAULT false,
    reason      text NOT NULL DEFAULT '',
    calls       integer NOT NULL DEFAULT 0,
    cost_micros bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    scored_at   timestamptz,
    -- The scored feedback's created_at: the partition key.
    feedback_at timestamptz NOT NULL,
    CONSTRAINT live_scores_check CHECK ((status = 'scored') = (score IS NOT NULL))
) PARTITION BY RANGE (feedback_at);
-- +goose StatementBegin
DO $do$
BEGIN
    -- NOT NULL as the identity column it replaces was (set here, the
    -- generated code keeps the type it had).
    ALTER TABLE feedback ALTER COLUMN seq SET NOT NULL;
    CREATE TABLE feedback_default PARTITION OF feedback DEFAULT;
    CREATE TABLE live_scores_default PARTITION OF live_scores DEFAULT;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
-- partition_indexes_name names a partition's indexes after the indexes of
-- the parent they belong to, with the partition's suffix (y2026m01,
-- default): a plan reading feedback_org_hash_idx_y2026m01 reads
-- feedback_org_hash_idx's part for January 2026.
CREATE FUNCTION partition_indexes_name(p_partition text, p_suffix text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT ci.relname AS child, cp.relname AS parent
        FROM pg_index x
        JOIN pg_class ci ON ci.oid = x.indexrelid
        JOIN pg_inherits i ON i.inhrelid = x.indexrelid
        JOIN pg_class cp ON cp.oid = i.inhparent
        WHERE x.indrelid = p_partition::regclass
    LOOP
        IF r.child <> r.parent || '_' || p_suffix THEN
            EXECUTE format('ALTER INDEX %I RENAME TO %I', r.child, r.parent || '_' || p_suffix);
        END IF;
    END LOOP;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
-- month_partition_ensure gives p_parent (feedback or live_scores, range
-- partitioned on p_key) a partition for the UTC month holding p_at, named
-- <parent>_yYYYYmMM, and moves that month's rows out of <parent>_default
-- into it. It returns whether it created the partition.
CREATE FUNCTION month_partition_ensure(p_parent text, p_key text, p_at timestamptz) RETURNS boolean
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

-- Partitions for every month the rows fall in, and this month and the
-- next two, before the rows are copied in.
SELECT month_partition_ensure('feedback', 'created_at', m)
FROM (SELECT DISTINCT date_trunc('month', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS m FROM feedback_unpartitioned
      UNION SELECT now() + n * interval '1 month' FROM generate_series(0, 2) n) ms;
SELECT month_partition_ensure('live_scores', 'feedback_at', m)
FROM (SELECT DISTINCT date_trunc('month', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS m FROM feedback_unpartitioned
      UNION SELECT now() + n * interval '1 month' FROM generate_series(0, 2) n) ms;

INSERT INTO feedback_keys (id, org_id, external_id, created_at)
SELECT id, org_id, external_id, created_at FROM feedback_unpartitioned;
INSERT INTO feedback SELECT * FROM feedback_unpartitioned;
SELECT setval('feedback_seq', coalesce((SELECT max(seq) FROM feedback_unpartitioned), 0) + 1, false);
INSERT INTO live_scores (scorer_id, feedback_id, org_id, status, score, safety_flag, reason, calls, cost_micros, created_at, scored_at, feedback_at)
SELECT l.scorer_id, l.feedback_id, l.org_id, l.status, l.score, l.safety_flag, l.reason, l.calls, l.cost_micros, l.created_at, l.scored_at, f.created_at
FROM live_scores_unpartitioned l JOIN feedback_unpartitioned f ON f.id = l.feedback_id;
DROP TABLE live_scores_unpartitioned;
DROP TABLE feedback_unpartitioned;

CREATE UNIQUE INDEX feedback_external_id_key ON feedback_keys (org_id, external_id) WHERE external_id IS NOT NULL;

ALTER TABLE feedback ADD CONSTRAINT feedback_pkey PRIMARY KEY (id, created_at);
CREATE INDEX feedback_comment_key_idx ON feedback (org_id, md5(lower(btrim(regexp_replace(comment, '\s+', ' ', 'g'))))) WHERE length(btrim(comment)) >= 20;
CREATE INDEX feedback_comment_letters_idx ON feedback (org_id, md5(regexp_replace(lower(comment), '[^[:alpha:]]+', '', 'g'))) WHERE length(btrim(comment)) >= 20;
CREATE INDEX feedback_experiment ON feedback (experiment_id, end_user_id) WHERE experiment_id IS NOT NULL;
CREATE INDEX feedback_org_assignee_idx ON feedback (org_id, assignee_id, created_at DESC, id DESC) WHERE assignee_id IS NOT NULL;
CREATE INDEX feedback_org_created_idx ON feedback (org_id, created_at DESC, id DESC);
CREATE INDEX feedback_org_end_user_idx ON feedback (org_id, end_user_id, created_at) WHERE end_user_id <> '';
CREATE INDEX feedback_org_hash_idx ON feedback (org_id, content_hash, seq);
CREATE INDEX feedback_org_model_idx ON feedback (org_id, model, created_at DESC);
CREATE INDEX feedback_org_query_key_idx ON feedback (org_id, md5(lower(btrim(regexp_replace(query, '\s+', ' ', 'g')))));
CREATE INDEX feedback_org_reviewed_idx ON feedback (org_id, reviewed_at) WHERE reviewed_at IS NOT NULL;
CREATE INDEX feedback_org_session_idx ON feedback (org_id, session_id, created_at) WHERE session_id <> '';
CREATE INDEX feedback_org_status_created_idx ON feedback (org_id, status, created_at DESC, id DESC);
CREATE INDEX feedback_org_trace ON feedback (org_id, trace_id) WHERE trace_id <> '';
CREATE INDEX feedback_pii_idx ON feedback (org_id, created_at DESC) WHERE pii_kinds <> '{}';
CREATE INDEX feedback_rank_group_idx ON feedback (org_id, rank_group) WHERE rank_group <> '';
CREATE INDEX feedback_search_idx ON feedback USING gin (feedback_document(query, response, comment));
CREATE INDEX feedback_tags_idx ON feedback USING gin (tags);

ALTER TABLE live_scores ADD CONSTRAINT live_scores_pkey PRIMARY KEY (scorer_id, feedback_id, feedback_at);
CREATE INDEX live_scores_feedback ON live_scores (feedback_id);
CREATE INDEX live_scores_pending ON live_scores (scorer_id, created_at) WHERE status = 'pending';

ALTER TABLE codebook_rule_uses ADD CONSTRAINT codebook_rule_uses_feedback_id_fkey FOREIGN KEY (feedback_id) REFERENCES feedback_keys (id) ON DELETE CASCADE;
ALTER TABLE codebook_suggestions ADD CONSTRAINT codebook_suggestions_feedback_id_fkey FOREIGN KEY (feedback_id) REFERENCES feedback_keys (id) ON DELETE CASCADE;
ALTER TABLE feedback_reviews ADD CONSTRAINT feedback_reviews_feedback_id_fkey FOREIGN KEY (feedback_id) REFERENCES feedback_keys (id) ON DELETE CASCADE;
ALTER TABLE judge_conflicts ADD CONSTRAINT judge_conflicts_feedback_id_fkey FOREIGN KEY (feedback_id) REFERENCES feedback_keys (id) ON DELETE CASCADE;
ALTER TABLE preference_pairs ADD CONSTRAINT preference_pairs_chosen_feedback_id_fkey FOREIGN KEY (chosen_feedback_id) REFERENCES feedback_keys (id) ON DELETE SET NULL;
ALTER TABLE preference_pairs ADD CONSTRAINT preference_pairs_rejected_feedback_id_fkey FOREIGN KEY (rejected_feedback_id) REFERENCES feedback_keys (id) ON DELETE SET NULL;
ALTER TABLE review_items ADD CONSTRAINT review_items_feedback_id_fkey FOREIGN KEY (feedback_id) REFERENCES feedback_keys (id) ON DELETE CASCADE;
ALTER TABLE training_dataset_members ADD CONSTRAINT training_dataset_members_feedback_id_fkey FOREIGN KEY (feedback_id) REFERENCES feedback_keys (id) ON DELETE CASCADE;
ALTER TABLE rubric_answers ADD CONSTRAINT rubric_answers_feedback_id_fkey FOREIGN KEY (feedback_id) REFERENCES feedback_keys (id) ON DELETE CASCADE;
ALTER TABLE shadow_queries ADD CONSTRAINT shadow_queries_feedback_id_fkey FOREIGN KEY (feedback_id) REFERENCES feedback_keys (id) ON DELETE CASCADE;

-- +goose StatementBegin
-- A feedback row's key is stored with it. An external id the organisation
-- has stored already skips the row. A row moving to another month's
-- partition (its created_at changed) keeps its key: feedback_key_move
-- marked it.
CREATE FUNCTION feedback_key_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF current_setting('curate.partition_move', true) = 'on' THEN
        RETURN NEW;
    END IF;
    IF current_setting('curate.feedback_moving', true) = NEW.id::text THEN
        PERFORM set_config('curate.feedback_moving', '', true);
        UPDATE feedback_keys SET created_at = NEW.created_at WHERE id = NEW.id;
        RETURN NEW;
    END IF;
    INSERT INTO feedback_keys (id, org_id, external_id, created_at) VALUES (NEW.id, NEW.org_id, NEW.external_id, NEW.created_at)
    ON CONFLICT (org_id, external_id) WHERE external_id IS NOT NULL DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION feedback_key_move() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF NEW.id <> OLD.id OR NEW.org_id <> OLD.org_id OR NEW.external_id IS DISTINCT FROM OLD.external_id THEN
        RAISE EXCEPTION 'a feedback row keeps its id, organisation and external id' USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.created_at <> OLD.created_at THEN
        PERFORM set_config('curate.feedback_moving', NEW.id::text, true);
        UPDATE feedback_keys SET created_at = NEW.created_at WHERE id = NEW.id;
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
-- A deleted feedback row's key goes with it, and cascades as the row's
-- own foreign keys did; a row that only moved partitions is still there.
CREATE FUNCTION feedback_key_delete() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF current_setting('curate.partition_move', true) = 'on' THEN
        RETURN NULL;
    END IF;
    DELETE FROM feedback_keys k WHERE k.id = OLD.id AND NOT EXISTS (SELECT 1 FROM feedback f WHERE f.id = OLD.id);
    RETURN NULL;
END
$fn$;
-- +goose StatementEnd

CREATE TRIGGER feedback_key_insert BEFORE INSERT ON feedback FOR EACH ROW EXECUTE FUNCTION feedback_key_insert();
CREATE TRIGGER feedback_key_move BEFORE UPDATE OF id, org_id, external_id, created_at ON feedback FOR EACH ROW EXECUTE FUNCTION feedback_key_move();
CREATE TRIGGER feedback_key_delete AFTER DELETE ON feedback FOR EACH ROW EXECUTE FUNCTION feedback_key_delete();

-- +goose StatementBegin
CREATE FUNCTION feedback_matches(
    f feedback,
    org_id uuid,
    status review_status,
    feedback_type feedback_type,
    source feedback_source,
    rating_min int,
    rating_max int,
    dim_below int,
    tag text,
    model text,
    assignee_id uuid,
    created_from timestamptz,
    created_to timestamptz,
    with_duplicates bool,
    pii_only bool,
    q text,
    dataset_id uuid,
    safety_only bool DEFAULT false
) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN f.org_id = feedback_matches.org_id
    AND (feedback_matches.status IS NULL OR f.status = feedback_matches.status)
    AND (feedback_matches.feedback_type IS NULL OR f.feedback_type = feedback_matches.feedback_type)
    AND (feedback_matches.source IS NULL OR f.source = feedback_matches.source)
    AND (feedback_matches.rating_min = 0 OR f.rating >= feedback_matches.rating_min)
    AND (feedback_matches.rating_max = 0 OR f.rating <= feedback_matches.rating_max)
    AND (feedback_matches.dim_below = 0
         OR least(coalesce(f.dim_accuracy, 9), coalesce(f.dim_helpfulness, 9), coalesce(f.dim_clarity, 9), coalesce(f.dim_safety, 9)) < feedback_matches.dim_below)
    AND (feedback_matches.tag = '' OR f.tags @> ARRAY[feedback_matches.tag])
    AND (feedback_matches.model = '' OR f.model = feedback_matches.model)
    AND (feedback_matches.assignee_id IS NULL OR f.assignee_id = feedback_matches.assignee_id)
    AND (feedback_matches.created_from IS NULL OR f.created_at >= feedback_matches.created_from)
    AND (feedback_matches.created_to IS NULL OR f.created_at < feedback_matches.created_to)
    AND (feedback_matches.with_duplicates OR f.duplicate_of IS NULL)
    AND (NOT feedback_matches.pii_only OR f.pii_kinds <> '{}')
    AND (feedback_matches.q = '' OR feedback_document(f.query, f.response, f.comment) @@ websearch_to_tsquery('english', feedback_matches.q))
    AND (feedback_matches.dataset_id IS NULL OR feedback_in_dataset(f.id, f.org_id, feedback_matches.dataset_id))
    AND (NOT feedback_matches.safety_only OR f.dim_safety <= 2 OR f.tags @> ARRAY['safety']);
-- +goose StatementEnd
SELECT partition_indexes_name(c.relname, CASE WHEN c.relname LIKE '%\_default' THEN 'default' ELSE right(c.relname, 8) END)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent IN ('feedback'::regclass, 'live_scores'::regclass);
ANALYZE feedback;
ANALYZE feedback_keys;
ANALYZE live_scores;

-- +goose Down
DROP TRIGGER feedback_key_insert ON feedback;
DROP TRIGGER feedback_key_move ON feedback;
DROP TRIGGER feedback_key_delete ON feedback;
DROP FUNCTION feedback_key_insert();
DROP FUNCTION feedback_key_move();
DROP FUNCTION feedback_key_delete();
DROP FUNCTION month_partition_ensure(text, text, timestamptz);
DROP FUNCTION partition_indexes_name(text, text);
ALTER TABLE codebook_rule_uses DROP CONSTRAINT codebook_rule_uses_feedback_id_fkey;
ALTER TABLE codebook_suggestions DROP CONSTRAINT codebook_suggestions_feedback_id_fkey;
ALTER TABLE feedback_reviews DROP CONSTRAINT feedback_reviews_feedback_id_fkey;
ALTER TABLE judge_conflicts DROP CONSTRAINT judge_conflicts_feedback_id_fkey;
ALTER TABLE preference_pairs DROP CONSTRAINT preference_pairs_chosen_feedback_id_fkey;
ALTER TABLE preference_pairs DROP CONSTRAINT preference_pairs_rejected_feedback_id_fkey;
ALTER TABLE review_items DROP CONSTRAINT review_items_feedback_id_fkey;
ALTER TABLE training_dataset_members DROP CONSTRAINT training_dataset_members_feedback_id_fkey;
ALTER TABLE rubric_answers DROP CONSTRAINT rubric_answers_feedback_id_fkey;
ALTER TABLE shadow_queries DROP CONSTRAINT shadow_queries_feedback_id_fkey;
DROP FUNCTION feedback_matches(feedback, uuid, review_status, feedback_type, feedback_source, int, int, int, text, text,
    uuid, timestamptz, timestamptz, bool, bool, text, uuid, bool);
ALTER TABLE feedback RENAME TO feedback_partitioned;
ALTER TABLE live_scores RENAME TO live_scores_partitioned;
ALTER INDEX feedback_pkey RENAME TO feedback_partitioned_pkey;
ALTER INDEX live_scores_pkey RENAME TO live_scores_partitioned_pkey;
ALTER INDEX live_scores_feedback RENAME TO live_scores_partitioned_feedback;
ALTER INDEX live_scores_pending RENAME TO live_scores_partitioned_pending;
DROP INDEX feedback_external_id_key;
DROP INDEX feedback_comment_key_idx, feedback_comment_letters_idx, feedback_experiment, feedback_org_assignee_idx, feedback_org_created_idx,
    feedback_org_end_user_idx, feedback_org_hash_idx, feedback_org_model_idx, feedback_org_query_key_idx, feedback_org_reviewed_idx,
    feedback_org_session_idx, feedback_org_status_created_idx, feedback_org_trace, feedback_pii_idx, feedback_rank_group_idx,
    feedback_search_idx, feedback_tags_idx;

CREATE TABLE feedback (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    seq              bigint GENERATED ALWAYS AS IDENTITY,
    org_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    external_id      text,
    session_id       text NOT NULL DEFAULT '',
    trace_id         text NOT NULL DEFAULT '',
    end_user_id      text NOT NULL DEFAULT '',
    query            text NOT NULL,
    response         text NOT NULL,
    context          jsonb NOT NULL DEFAULT '{}',
    model            text NOT NULL DEFAULT '',
    experiment_arm   text NOT NULL DEFAULT '',
    feedback_type    feedback_type NOT NULL,
    rating           smallint CHECK (rating BETWEEN 1 AND 5),
    dim_accuracy     smallint CHECK (dim_accuracy BETWEEN 1 AND 5),
    dim_helpfulness  smallint CHECK (dim_helpfulness BETWEEN 1 AND 5),
    dim_clarity      smallint CHECK (dim_clarity BETWEEN 1 AND 5),
    dim_safety       smallint CHECK (dim_safety BETWEEN 1 AND 5),
    comment          text NOT NULL DEFAULT '',
    correction       text NOT NULL DEFAULT '',
    latency_ms       integer CHECK (latency_ms >= 0),
    tags             text[] NOT NULL DEFAULT '{}',
    status           review_status NOT NULL DEFAULT 'pending',
    assignee_id      uuid REFERENCES users (id) ON DELETE SET NULL,
    reviewer_id      uuid REFERENCES users (id) ON DELETE SET NULL,
    reviewed_at      timestamptz,
    source           feedback_source NOT NULL,
    rank             smallint,
    rank_group       text NOT NULL DEFAULT '',
    pii_kinds        text[] NOT NULL DEFAULT '{}',
    content_hash     bytea NOT NULL,
    duplicate_of     uuid REFERENCES feedback (id) ON DELETE SET NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    version          integer NOT NULL DEFAULT 1,
    experiment_id    uuid,
    is_error         boolean NOT NULL DEFAULT false,
    is_training_data boolean NOT NULL DEFAULT true,
    hygiene_flags    text[] NOT NULL DEFAULT '{}',
    training_set_by  text NOT NULL DEFAULT '',
    given_by         uuid REFERENCES users (id) ON DELETE SET NULL
);
INSERT INTO feedback OVERRIDING SYSTEM VALUE SELECT * FROM feedback_partitioned;
SELECT setval(pg_get_serial_sequence('feedback', 'seq'), coalesce((SELECT max(seq) FROM feedback), 0) + 1, false);
CREATE TABLE live_scores (
    scorer_id   uuid NOT NULL REFERENCES live_scorers (id) ON DELETE CASCADE,
    feedback_id uuid NOT NULL REFERENCES feedback (id) ON DELETE CASCADE,
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'scored', 'invalid', 'skipped')),
    score       double precision CHECK (score >= 0 AND score <= 1),
    safety_flag boolean NOT NULL DEFAULT false,
    reason      text NOT NULL DEFAULT '',
    calls       integer NOT NULL DEFAULT 0,
    cost_micros bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    scored_at   timestamptz,
    PRIMARY KEY (scorer_id, feedback_id),
    CHECK ((status = 'scored') = (score IS NOT NULL))
);
INSERT INTO live_scores SELECT scorer_id, feedback_id, org_id, status, score, safety_flag, reason, calls, cost_micros, created_at, scored_at
FROM live_scores_partitioned;
DROP TABLE live_scores_partitioned;
DROP TABLE feedback_partitioned;
DROP TABLE feedback_keys;

CREATE UNIQUE INDEX feedback_external_id_key ON feedback (org_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX feedback_comment_key_idx ON feedback (org_id, md5(lower(btrim(regexp_replace(comment, '\s+', ' ', 'g'))))) WHERE length(btrim(comment)) >= 20;
CREATE INDEX feedback_comment_letters_idx ON feedback (org_id, md5(regexp_replace(lower(comment), '[^[:alpha:]]+', '', 'g'))) WHERE length(btrim(comment)) >= 20;
CREATE INDEX feedback_experiment ON feedback (experiment_id, end_user_id) WHERE experiment_id IS NOT NULL;
CREATE INDEX feedback_org_assignee_idx ON feedback (org_id, assignee_id, created_at DESC, id DESC) WHERE assignee_id IS NOT NULL;
CREATE INDEX feedback_org_created_idx ON feedback (org_id, created_at DESC, id DESC);
CREATE INDEX feedback_org_end_user_idx ON feedback (org_id, end_user_id, created_at) WHERE end_user_id <> '';
CREATE INDEX feedback_org_hash_idx ON feedback (org_id, content_hash, seq);
CREATE INDEX feedback_org_model_idx ON feedback (org_id, model, created_at DESC);
CREATE INDEX feedback_org_query_key_idx ON feedback (org_id, md5(lower(btrim(regexp_replace(query, '\s+', ' ', 'g')))));
CREATE INDEX feedback_org_reviewed_idx ON feedback (org_id, reviewed_at) WHERE reviewed_at IS NOT NULL;
CREATE INDEX feedback_org_session_idx ON feedback (org_id, session_id, created_at) WHERE session_id <> '';
CREATE INDEX feedback_org_status_created_idx ON feedback (org_id, status, created_at DESC, id DESC);
CREATE INDEX feedback_org_trace ON feedback (org_id, trace_id) WHERE trace_id <> '';
CREATE INDEX feedback_pii_idx ON feedback (org_id, created_at DESC) WHERE pii_kinds <> '{}';
CREATE INDEX feedback_rank_group_idx ON feedback (org_id, rank_group) WHERE rank_group <> '';
CREATE INDEX feedback_search_idx ON feedback USING gin (feedback_document(query, response, comment));
CREATE INDEX feedback_tags_idx ON feedback USING gin (tags);
CREATE INDEX live_scores_feedback ON live_scores (feedback_id);
CREATE INDEX live_scores_pending ON live_scores (scorer_id, created_at) WHERE status = 'pending';

ALTER TABLE codebook_rule_uses ADD FOREIGN KEY (feedback_id) REFERENCES feedback (id) ON DELETE CASCADE;
ALTER TABLE codebook_suggestions ADD FOREIGN KEY (feedback_id) REFERENCES feedback (id) ON DELETE CASCADE;
ALTER TABLE feedback_reviews ADD FOREIGN KEY (feedback_id) REFERENCES feedback (id) ON DELETE CASCADE;
ALTER TABLE judge_conflicts ADD FOREIGN KEY (feedback_id) REFERENCES feedback (id) ON DELETE CASCADE;
ALTER TABLE preference_pairs ADD FOREIGN KEY (chosen_feedback_id) REFERENCES feedback (id) ON DELETE SET NULL;
ALTER TABLE preference_pairs ADD FOREIGN KEY (rejected_feedback_id) REFERENCES feedback (id) ON DELETE SET NULL;
ALTER TABLE review_items ADD FOREIGN KEY (feedback_id) REFERENCES feedback (id) ON DELETE CASCADE;
ALTER TABLE training_dataset_members ADD FOREIGN KEY (feedback_id) REFERENCES feedback (id) ON DELETE CASCADE;
ALTER TABLE rubric_answers ADD FOREIGN KEY (feedback_id) REFERENCES feedback (id) ON DELETE CASCADE;
ALTER TABLE shadow_queries ADD FOREIGN KEY (feedback_id) REFERENCES feedback (id) ON DELETE CASCADE;
-- +goose StatementBegin
CREATE FUNCTION feedback_matches(
    f feedback,
    org_id uuid,
    status review_status,
    feedback_type feedback_type,
    source feedback_source,
    rating_min int,
    rating_max int,
    dim_below int,
    tag text,
    model text,
    assignee_id uuid,
    created_from timestamptz,
    created_to timestamptz,
    with_duplicates bool,
    pii_only bool,
    q text,
    dataset_id uuid,
    safety_only bool DEFAULT false
) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN f.org_id = feedback_matches.org_id
    AND (feedback_matches.status IS NULL OR f.status = feedback_matches.status)
    AND (feedback_matches.feedback_type IS NULL OR f.feedback_type = feedback_matches.feedback_type)
    AND (feedback_matches.source IS NULL OR f.source = feedback_matches.source)
    AND (feedback_matches.rating_min = 0 OR f.rating >= feedback_matches.rating_min)
    AND (feedback_matches.rating_max = 0 OR f.rating <= feedback_matches.rating_max)
    AND (feedback_matches.dim_below = 0
         OR least(coalesce(f.dim_accuracy, 9), coalesce(f.dim_helpfulness, 9), coalesce(f.dim_clarity, 9), coalesce(f.dim_safety, 9)) < feedback_matches.dim_below)
    AND (feedback_matches.tag = '' OR f.tags @> ARRAY[feedback_matches.tag])
    AND (feedback_matches.model = '' OR f.model = feedback_matches.model)
    AND (feedback_matches.assignee_id IS NULL OR f.assignee_id = feedback_matches.assignee_id)
    AND (feedback_matches.created_from IS NULL OR f.created_at >= feedback_matches.created_from)
    AND (feedback_matches.created_to IS NULL OR f.created_at < feedback_matches.created_to)
    AND (feedback_matches.with_duplicates OR f.duplicate_of IS NULL)
    AND (NOT feedback_matches.pii_only OR f.pii_kinds <> '{}')
    AND (feedback_matches.q = '' OR feedback_document(f.query, f.response, f.comment) @@ websearch_to_tsquery('english', feedback_matches.q))
    AND (feedback_matches.dataset_id IS NULL OR feedback_in_dataset(f.id, f.org_id, feedback_matches.dataset_id))
    AND (NOT feedback_matches.safety_only OR f.dim_safety <= 2 OR f.tags @> ARRAY['safety']);
-- +goose StatementEnd
