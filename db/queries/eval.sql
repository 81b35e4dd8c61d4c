-- Evaluation: golden sets (internal/eval).

-- name: GoldenSetInsertOrUpdate :one
INSERT INTO golden_sets (version_id, org_id, name, split_tags, created_by_label)
VALUES (@version_id, @org_id, @name, @split_tags, @created_by_label)
ON CONFLICT (version_id) DO UPDATE SET name = EXCLUDED.name, split_tags = EXCLUDED.split_tags
RETURNING *;

-- name: GoldenSetDelete :execrows
DELETE FROM golden_sets WHERE org_id = @org_id AND version_id = @version_id;

-- name: GoldenSetList :many
SELECT sqlc.embed(g), dv.number AS version_number, dv.item_count, dv.kind, d.id AS dataset_id, d.name AS dataset_name
FROM golden_sets g
JOIN dataset_versions dv ON dv.id = g.version_id
JOIN training_datasets d ON d.id = dv.dataset_id
WHERE g.org_id = @org_id
ORDER BY g.created_at DESC;

-- name: GoldenSetGet :one
SELECT * FROM golden_sets WHERE org_id = @org_id AND version_id = @version_id;

-- name: GoldenSetListItems :many
-- A frozen version's items with the tags of what each came from, for
-- splits by tag: feedback's tags, or a pair's.
SELECT i.source_id, i.split, i.content, coalesce(f.tags, p.tags, '{}')::text[] AS tags
FROM dataset_version_items i
JOIN dataset_versions dv ON dv.id = i.version_id AND dv.org_id = @org_id
LEFT JOIN feedback f ON f.id = i.source_id AND f.org_id = @org_id
LEFT JOIN preference_pairs p ON p.id = i.source_id AND p.org_id = @org_id
WHERE i.version_id = @version_id
ORDER BY i.content_sha, i.source_id;
