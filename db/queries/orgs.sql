-- name: OrgInsert :one
INSERT INTO organizations (slug, name) VALUES ($1, $2) RETURNING *;

-- name: OrgGetBySlug :one
SELECT * FROM organizations WHERE slug = $1;
