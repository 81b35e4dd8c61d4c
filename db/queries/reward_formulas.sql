-- name: RewardFormulaInsert :one
-- The next version of a formula by name (1 for a new name). Two writers
-- racing for the same number: the unique key refuses the second.
INSERT INTO reward_formulas (org_id, name, version, weights, created_by, created_by_label)
SELECT @org_id, @name::text, COALESCE(MAX(f.version), 0) + 1, @weights, @created_by, @created_by_label
FROM reward_formulas f WHERE f.org_id = @org_id AND f.name = @name::text
RETURNING *;

-- name: RewardFormulaInsertDefault :exec
-- The default formula's first version, once per organisation.
INSERT INTO reward_formulas (org_id, name, version, weights, created_by_label)
VALUES (@org_id, 'default', 1, @weights, 'system')
ON CONFLICT (org_id, name, version) DO NOTHING;

-- name: RewardFormulaList :many
SELECT * FROM reward_formulas WHERE org_id = @org_id ORDER BY name, version DESC;

-- name: RewardFormulaGetLatest :one
SELECT * FROM reward_formulas WHERE org_id = @org_id AND name = @name
ORDER BY version DESC LIMIT 1;

-- name: RewardFormulaGet :one
SELECT * FROM reward_formulas WHERE org_id = @org_id AND id = @id;
