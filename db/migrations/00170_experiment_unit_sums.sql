-- +goose Up
-- An experiment's results read each unit's values from experiment_unit_sums
-- instead of every answer of the experiment: one row per unit of a phase
-- with its mean of each metric over its feedback in the phase (y_*) and
-- over its feedback in the CUPED window before its first exposure (x_*,
-- kept only beside a y_*), computed by the same expressions as
-- ExperimentListMetricMoments, and its safety incidents. experiment_sums says what the rows were made for (the
-- phase, its start and the CUPED window); when the experiment no longer
-- matches, they are made again.
CREATE TABLE experiment_sums (
    experiment_id uuid PRIMARY KEY REFERENCES experiments (id) ON DELETE CASCADE,
    org_id        uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    phase         integer NOT NULL,
    since         timestamptz,
    pre_days      integer NOT NULL,
    built_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX experiment_sums_org ON experiment_sums (org_id);

CREATE TABLE experiment_unit_sums (
    experiment_id   uuid NOT NULL REFERENCES experiment_sums (experiment_id) ON DELETE CASCADE,
    phase           integer NOT NULL,
    unit_id         text NOT NULL,
    arm             integer NOT NULL,
    y_thumbs        double precision, x_thumbs      double precision,
    y_rating        double precision, x_rating      double precision,
    y_corrected     double precision, x_corrected   double precision,
    y_latency       double precision, x_latency     double precision,
    y_accuracy      double precision, x_accuracy    double precision,
    y_helpfulness   double precision, x_helpfulness double precision,
    y_clarity       double precision, x_clarity     double precision,
    y_safety        double precision, x_safety      double precision,
    y_judge         double precision, x_judge       double precision,
    incidents       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (experiment_id, phase, unit_id)
);

-- The end users whose units' values may have changed since they were last
-- folded in: written in the same transaction as the change, so a fold
-- that reads and deletes them misses none. An answer can change a unit's
-- values when it belongs to an experiment, or when it is dated in the past
-- (it may fall in a unit's pre-exposure window); an edit or removal of an
-- answer, and a live score, always can. Answers sent now outside any
-- experiment write nothing. No key: duplicates are folded once.
CREATE TABLE experiment_sums_dirty (
    org_id  uuid NOT NULL,
    unit_id text NOT NULL
);
CREATE INDEX experiment_sums_dirty_org ON experiment_sums_dirty (org_id);

-- +goose StatementBegin
CREATE FUNCTION experiment_sums_feedback_inserted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO experiment_sums_dirty (org_id, unit_id)
    SELECT DISTINCT n.org_id, n.end_user_id FROM new_rows n
    WHERE n.end_user_id <> '' AND (n.experiment_id IS NOT NULL OR n.created_at < now() - interval '1 minute');
    RETURN NULL;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION experiment_sums_feedback_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO experiment_sums_dirty (org_id, unit_id)
    SELECT DISTINCT o.org_id, o.end_user_id FROM old_rows o
    LEFT JOIN new_rows n ON n.id = o.id
    WHERE o.end_user_id <> '' AND (n.id IS NULL
        OR (o.feedback_type, o.rating, o.correction, o.latency_ms, o.dim_accuracy, o.dim_helpfulness, o.dim_clarity, o.dim_safety,
            o.experiment_id, o.end_user_id, o.created_at)
           IS DISTINCT FROM
           (n.feedback_type, n.rating, n.correction, n.latency_ms, n.dim_accuracy, n.dim_helpfulness, n.dim_clarity, n.dim_safety,
            n.experiment_id, n.end_user_id, n.created_at))
    UNION
    SELECT n.org_id, n.end_user_id FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.end_user_id <> '' AND n.end_user_id IS DISTINCT FROM o.end_user_id;
    RETURN NULL;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION experiment_sums_feedback_deleted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO experiment_sums_dirty (org_id, unit_id)
    SELECT DISTINCT o.org_id, o.end_user_id FROM old_rows o WHERE o.end_user_id <> '';
    RETURN NULL;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION experiment_sums_score_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO experiment_sums_dirty (org_id, unit_id)
        SELECT DISTINCT f.org_id, f.end_user_id FROM new_rows n JOIN feedback f ON f.id = n.feedback_id WHERE f.end_user_id <> '';
    END IF;
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO experiment_sums_dirty (org_id, unit_id)
        SELECT DISTINCT f.org_id, f.end_user_id FROM old_rows o JOIN feedback f ON f.id = o.feedback_id WHERE f.end_user_id <> '';
    END IF;
    RETURN NULL;
END
$fn$;
-- +goose StatementEnd

CREATE TRIGGER feedback_sums_inserted AFTER INSERT ON feedback REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION experiment_sums_feedback_inserted();
CREATE TRIGGER feedback_sums_changed AFTER UPDATE ON feedback REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION experiment_sums_feedback_changed();
CREATE TRIGGER feedback_sums_deleted AFTER DELETE ON feedback REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION experiment_sums_feedback_deleted();
CREATE TRIGGER live_scores_sums_inserted AFTER INSERT ON live_scores REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION experiment_sums_score_changed();
CREATE TRIGGER live_scores_sums_changed AFTER UPDATE ON live_scores REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION experiment_sums_score_changed();
CREATE TRIGGER live_scores_sums_deleted AFTER DELETE ON live_scores REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION experiment_sums_score_changed();

-- +goose Down
DROP TRIGGER live_scores_sums_deleted ON live_scores;
DROP TRIGGER live_scores_sums_changed ON live_scores;
DROP TRIGGER live_scores_sums_inserted ON live_scores;
DROP TRIGGER feedback_sums_deleted ON feedback;
DROP TRIGGER feedback_sums_changed ON feedback;
DROP TRIGGER feedback_sums_inserted ON feedback;
DROP FUNCTION experiment_sums_score_changed();
DROP FUNCTION experiment_sums_feedback_deleted();
DROP FUNCTION experiment_sums_feedback_changed();
DROP FUNCTION experiment_sums_feedback_inserted();
DROP TABLE experiment_sums_dirty;
DROP TABLE experiment_unit_sums;
DROP TABLE experiment_sums;
