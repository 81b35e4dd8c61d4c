-- +goose Up
-- A best-of-N call that sampled its candidates from a model version
-- records the version, so that a shadow of the alias the version serves
-- mirrors the call itself: a shadow's query is a feedback item or such a
-- call (its selected candidate production's answer), each keyed by an id
-- of its own, and the shadow keeps a second cursor over the calls.
ALTER TABLE best_of_n_responses ADD COLUMN model_version_id uuid REFERENCES model_versions (id) ON DELETE SET NULL;
CREATE INDEX best_of_n_responses_version ON best_of_n_responses (org_id, model_version_id, created_at, id) WHERE model_version_id IS NOT NULL;

ALTER TABLE shadows ADD COLUMN call_cursor_at timestamptz, ADD COLUMN call_cursor_id uuid;

ALTER TABLE shadow_queries DROP CONSTRAINT shadow_queries_pkey;
ALTER TABLE shadow_queries ADD COLUMN id uuid PRIMARY KEY DEFAULT gen_random_uuid();
ALTER TABLE shadow_queries ALTER COLUMN feedback_id DROP NOT NULL;
ALTER TABLE shadow_queries ADD COLUMN selection_id uuid REFERENCES best_of_n_responses (id) ON DELETE CASCADE;
ALTER TABLE shadow_queries ADD CONSTRAINT shadow_queries_one_source CHECK ((feedback_id IS NULL) <> (selection_id IS NULL));
DROP INDEX shadow_queries_feedback;
CREATE UNIQUE INDEX shadow_queries_by_feedback ON shadow_queries (shadow_id, feedback_id) WHERE feedback_id IS NOT NULL;
CREATE UNIQUE INDEX shadow_queries_by_selection ON shadow_queries (shadow_id, selection_id) WHERE selection_id IS NOT NULL;
CREATE INDEX shadow_queries_feedback ON shadow_queries (feedback_id) WHERE feedback_id IS NOT NULL;
CREATE INDEX shadow_queries_selection ON shadow_queries (selection_id) WHERE selection_id IS NOT NULL;

-- +goose Down
DROP INDEX shadow_queries_selection;
DROP INDEX shadow_queries_feedback;
DROP INDEX shadow_queries_by_selection;
DROP INDEX shadow_queries_by_feedback;
DELETE FROM shadow_queries WHERE selection_id IS NOT NULL;
ALTER TABLE shadow_queries DROP CONSTRAINT shadow_queries_one_source;
ALTER TABLE shadow_queries DROP COLUMN selection_id;
ALTER TABLE shadow_queries ALTER COLUMN feedback_id SET NOT NULL;
ALTER TABLE shadow_queries DROP COLUMN id;
ALTER TABLE shadow_queries ADD PRIMARY KEY (shadow_id, feedback_id);
CREATE INDEX shadow_queries_feedback ON shadow_queries (feedback_id);
ALTER TABLE shadows DROP COLUMN call_cursor_at, DROP COLUMN call_cursor_id;
DROP INDEX best_of_n_responses_version;
ALTER TABLE best_of_n_responses DROP COLUMN model_version_id;
