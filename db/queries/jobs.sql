-- name: RiverJobCountByKindState :many
-- For /metrics: River's jobs are shared by all organisations, so these counts
-- are never shown on an organisation's pages.
SELECT kind, state::text AS state, count(*) AS count FROM river_job GROUP BY kind, state ORDER BY kind, state;

-- name: RiverMigrationGetVersion :one
-- /readyz asks this: it fails unless River's tables are in place.
SELECT coalesce(max(version), 0)::bigint FROM river_migration;
