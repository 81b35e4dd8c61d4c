-- +goose Up
-- The best-of-N call a feedback row names: its trace_id when that is a
-- uuid (a best-of-N answer's id), else null. Live scoring and shadows read
-- the call's context and version through it; a plain SQL function, so the
-- planner inlines it and the lookup stays one by primary key.
CREATE FUNCTION trace_selection_id(trace_id text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN trace_id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN trace_id::uuid END;

-- +goose Down
DROP FUNCTION trace_selection_id(text);
