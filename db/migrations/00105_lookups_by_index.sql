-- +goose Up
-- A connection keeps the plan it made for a statement, and one made while
-- a table was nearly empty reads the table whole, as it still does when
-- the table has grown and no ANALYZE came between. The ingest's duplicate
-- lookup is a function planned with sequential scans off, so that its plan
-- reads feedback_org_hash_idx however small feedback was when it was made;
-- assignment's batch statement (experiment_assign) is planned so too.
-- +goose StatementBegin
CREATE FUNCTION feedback_first_id(p_org_id uuid, p_content_hash bytea) RETURNS uuid
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $fn$
BEGIN
    RETURN (SELECT d.id FROM feedback d WHERE d.org_id = p_org_id AND d.content_hash = p_content_hash ORDER BY d.seq LIMIT 1);
END
$fn$;
-- +goose StatementEnd
ALTER FUNCTION experiment_assign(uuid, uuid, integer, text[], integer[], bigint) SET enable_seqscan = off;

-- +goose Down
ALTER FUNCTION experiment_assign(uuid, uuid, integer, text[], integer[], bigint) RESET enable_seqscan;
DROP FUNCTION feedback_first_id(uuid, bytea);
