-- The temporary table a freeze stages its items in (the query
-- DatasetVersionItemStageInsertTable makes it, per transaction); this copy only
-- lets sqlc type-check the queries that read it.
CREATE TABLE dataset_version_item_stage (
    content_sha bytea NOT NULL,
    source_id   uuid NOT NULL,
    split       text NOT NULL,
    content     jsonb NOT NULL
);
