-- Codebooks, their rules, published versions and retrieval.

-- name: CodebookInsertOrGet :one
INSERT INTO codebooks (org_id, name) VALUES (@org_id, @name)
ON CONFLICT (org_id, name) DO UPDATE SET name = excluded.name
RETURNING *;

-- name: CodebookGetByName :one
SELECT * FROM codebooks WHERE org_id = @org_id AND name = @name;

-- name: CodebookGetByNameForUpdate :one
-- Holds the codebook still until the transaction ends, so that two
-- publishes of the same rules cannot both number a new version.
SELECT * FROM codebooks WHERE org_id = @org_id AND name = @name FOR UPDATE;

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
ORDER BY CASE @sort::text WHEN 'helpful' THEN -helpful WHEN 'harmful' THEN -harmful ELSE 0 END, section, harmful - helpful DESC, created_at
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
    SELECT position, ts_rank(search, to_tsquery('english', replace(plainto_tsquery('english', @query)::text, ' & ', ' | '))) AS rank
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

-- name: CodebookUpdateBudget :one
UPDATE codebooks SET budget_tokens = @budget_tokens WHERE org_id = @org_id AND id = @id RETURNING *;

-- name: CodebookRuleListSimilar :many
-- Rules of a codebook (not retired) whose text is close to content: the
-- near-duplicates a curator is shown before adding a rule.
SELECT sqlc.embed(r), similarity(r.content, @content)::float8 AS similarity
FROM codebook_rules r
WHERE r.codebook_id = @codebook_id AND r.status <> 'retired' AND r.content % @content
  AND similarity(r.content, @content) >= @threshold::float8 AND r.id <> @except_id
ORDER BY similarity DESC, r.created_at
LIMIT 5;

-- name: CodebookRuleUpdateMerge :one
-- Merges a new rule's sources into an existing rule (ACE's delta: the
-- playbook grows by counters and links, not by a second copy).
UPDATE codebook_rules SET source_feedback_ids = ARRAY(SELECT DISTINCT unnest(source_feedback_ids || @source_feedback_ids::uuid[])),
    version = version + 1, updated_at = now()
WHERE org_id = @org_id AND codebook_id = @codebook_id AND id = @id
RETURNING *;

-- name: CodebookRuleUseList :many
-- A rule's most recent uses: the feedback that named it and how it counted.
SELECT u.outcome, f.id, f.query, f.feedback_type, f.rating, f.created_at
FROM codebook_rule_uses u JOIN feedback f ON f.id = u.feedback_id
WHERE u.rule_id = @rule_id AND f.org_id = @org_id
ORDER BY f.created_at DESC
LIMIT 20;

-- name: CodebookVersionGet :one
SELECT * FROM codebook_versions WHERE codebook_id = @codebook_id AND version = @version;

-- name: CodebookVersionRuleListPlain :many
SELECT rule_id, section, content FROM codebook_version_rules WHERE version_id = @version_id ORDER BY position;

-- name: CodebookSuggestionInsertMany :many
-- Asks for suggestions from corrected items: one per item and codebook. An
-- item whose suggestion failed or was dismissed is asked again; one ready,
-- pending or accepted is left as it is.
INSERT INTO codebook_suggestions (org_id, codebook_id, feedback_id, endpoint, template_version, created_by_label)
SELECT @org_id, @codebook_id, f.id, @endpoint, @template_version, @created_by_label
FROM feedback f
WHERE f.org_id = @org_id AND f.id = ANY(@feedback_ids::uuid[]) AND f.correction <> ''
ORDER BY f.created_at DESC
LIMIT @row_limit
ON CONFLICT (codebook_id, feedback_id) DO UPDATE SET status = 'pending', endpoint = excluded.endpoint,
    template_version = excluded.template_version, section = '', content = '', reason = '', updated_at = now()
WHERE codebook_suggestions.status IN ('failed', 'dismissed')
RETURNING id;

-- name: CodebookSuggestionGetByID :one
SELECT * FROM codebook_suggestions WHERE id = @id;

-- name: CodebookSuggestionGet :one
SELECT * FROM codebook_suggestions WHERE org_id = @org_id AND codebook_id = @codebook_id AND id = @id;

-- name: CodebookSuggestionGetByFeedback :one
SELECT * FROM codebook_suggestions WHERE org_id = @org_id AND codebook_id = @codebook_id AND feedback_id = @feedback_id;

-- name: CodebookSuggestionGetCached :one
-- An earlier answer to the same question, reused instead of paid again.
SELECT section, content FROM codebook_suggestions
WHERE org_id = @org_id AND cache_key = @cache_key AND status IN ('ready', 'accepted') AND content <> ''
LIMIT 1;

-- name: CodebookSuggestionUpdateAnswer :exec
UPDATE codebook_suggestions SET status = @status, section = @section, content = @content, reason = @reason, cache_key = @cache_key,
    calls = calls + @calls, cost_micros = cost_micros + @cost_micros, updated_at = now()
WHERE id = @id AND status = 'pending';

-- name: CodebookSuggestionUpdateReviewed :execrows
UPDATE codebook_suggestions SET status = @status, rule_id = sqlc.narg('rule_id'), updated_at = now()
WHERE org_id = @org_id AND codebook_id = @codebook_id AND id = @id AND status IN ('ready', 'failed');

-- name: CodebookSuggestionList :many
SELECT s.*, f.query, f.response, f.correction
FROM codebook_suggestions s JOIN feedback f ON f.id = s.feedback_id
WHERE s.codebook_id = @codebook_id AND (@status::text = '' OR s.status::text = @status)
ORDER BY s.created_at, s.id
LIMIT 200;

-- name: CodebookSuggestionCount :many
SELECT status, count(*)::int AS n FROM codebook_suggestions WHERE codebook_id = @codebook_id GROUP BY status;
