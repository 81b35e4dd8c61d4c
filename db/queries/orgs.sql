-- name: OrgInsert :one
INSERT INTO organizations (slug, name) VALUES ($1, $2) RETURNING *;

-- name: OrgGetBySlug :one
SELECT * FROM organizations WHERE slug = $1;

-- name: OrgGet :one
SELECT * FROM organizations WHERE id = $1;

-- name: OrgUpdateExperimentEngine :exec
UPDATE organizations SET experiment_engine = @experiment_engine WHERE id = @id;
