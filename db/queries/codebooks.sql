-- Codebooks, their rules, published versions and retrieval.

-- name: CodebookInsertOrGet :one
INSERT INTO codebooks (org_id, name) VALUES (@org_id, @name)
ON CONFLICT (org_id, name) DO UPDATE SET name = excluded.name
RETURNING *;

-- name: CodebookGetByName :one
SELECT * FROM codebooks WHERE org_id = @org_id AND name = @name;

-- name: CodebookList :many
SELECT c.*, (SELECT count(*) FROM codebook_rules r WHERE r.codebook_id = c.id)::int AS rules,
       coalesce((SELECT max(v.version) FROM codebook_versions v WHERE v.codebook_id = c.id), 0)::int AS published
FROM codebooks c WHERE c.org_id = @org_id ORDER BY c.name;

-- name: CodebookRuleInsert :one
INSERT INTO codebook_rules (org_id, codebook_id, section, content, status, source_feedback_ids, helpful, harmful, neutral, created_by_label)
VALUES (@org_id, @codebook_id, @section, @content, @status, @source_feedback_ids, @helpful, @harmful, @neutral, @created_by_label)
RETURNING *;

-- name: CodebookRuleGet :one
SELECT * FROM codebook_rules WHERE org_id = @org_id AND codebook_id = @codebook_id AND id = @id;

-- name: CodebookRuleList :many
SELECT * FROM codebook_rules
WHERE codebook_id = @codebook_id AND (@status::text = '' OR status::text = @status)
  AND (@q::text = '' OR content ILIKE '%' || @q || '%' OR section ILIKE '%' || @q || '%')
ORDER BY section, harmful - helpful DESC, created_at
LIMIT 1000;

-- name: CodebookRuleListActive :many
-- The rules a published version holds, in the order it writes them.
SELECT * FROM codebook_rules WHERE codebook_id = @codebook_id AND status = 'active' ORDER BY section, content, id;

-- name: CodebookRuleUpdate :one
UPDATE codebook_rules SET section = @section, content = @content, status = @status, version = version + 1, updated_at = now()
WHERE org_id = @org_id AND id = @id AND version = @version
RETURNING *;

-- name: CodebookRuleListIDsInOrg :many
SELECT id FROM codebook_rules WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- name: CodebookRuleUseInsertMany :exec
-- Counts a feedback item's use of rules once: a use already recorded is
-- not counted again.
WITH new AS (
    INSERT INTO codebook_rule_uses (feedback_id, rule_id, outcome)
    SELECT @feedback_id::uuid, unnest(@rule_ids::uuid[]), @outcome::text
    ON CONFLICT DO NOTHING
    RETURNING rule_id
)
UPDATE codebook_rules SET helpful = helpful + CASE WHEN @outcome = 'helpful' THEN 1 ELSE 0 END,
    harmful = harmful + CASE WHEN @outcome = 'harmful' THEN 1 ELSE 0 END,
    neutral = neutral + CASE WHEN @outcome = 'neutral' THEN 1 ELSE 0 END
WHERE id IN (SELECT rule_id FROM new);

-- name: CodebookVersionGetLatest :one
SELECT * FROM codebook_versions WHERE codebook_id = @codebook_id ORDER BY version DESC LIMIT 1;

-- name: CodebookVersionList :many
SELECT * FROM codebook_versions WHERE codebook_id = @codebook_id ORDER BY version DESC LIMIT 100;

-- name: CodebookVersionInsert :one
INSERT INTO codebook_versions (org_id, codebook_id, version, content_hash, published_by_label)
SELECT @org_id, @codebook_id, coalesce(max(version), 0) + 1, @content_hash, @published_by_label
FROM codebook_versions WHERE codebook_id = @codebook_id
RETURNING *;

-- name: CodebookVersionRuleInsertMany :copyfrom
INSERT INTO codebook_version_rules (version_id, position, rule_id, section, content) VALUES (@version_id, @position, @rule_id, @section, @content);

-- name: CodebookVersionRuleList :many
SELECT v.rule_id, v.section, v.content, coalesce(r.helpful, 0)::int AS helpful, coalesce(r.harmful, 0)::int AS harmful,
       coalesce(r.neutral, 0)::int AS neutral
FROM codebook_version_rules v LEFT JOIN codebook_rules r ON r.id = v.rule_id
WHERE v.version_id = @version_id ORDER BY v.position;

-- name: CodebookVersionRuleListRelevant :many
-- The k rules of a published version most relevant to a query: the 50
-- best by full-text rank (the query's words OR-ed, so a rule need not hold
-- every word asked), ordered again with their trigram word similarity to
-- the query added. The tsquery is written out, a constant to the planner.
WITH fts AS (
    SELECT position, ts_rank_cd(search, to_tsquery('english', replace(plainto_tsquery('english', @query)::text, ' & ', ' | '))) AS rank
    FROM codebook_version_rules
    WHERE version_id = @version_id AND search @@ to_tsquery('english', replace(plainto_tsquery('english', @query)::text, ' & ', ' | '))
    ORDER BY rank DESC
    LIMIT 50
)
SELECT r.rule_id, r.section, r.content, (f.rank + word_similarity(@query, r.content))::float8 AS score
FROM fts f JOIN codebook_version_rules r ON r.version_id = @version_id AND r.position = f.position
ORDER BY score DESC, r.position
LIMIT @k;

-- name: CodebookRuleInsertImported :exec
-- An imported rule, active, keeping its counters.
INSERT INTO codebook_rules (org_id, codebook_id, section, content, status, helpful, harmful, created_by_label)
VALUES (@org_id, @codebook_id, @section, @content, 'active', @helpful, @harmful, @created_by_label);
