-- Preference pairs: the editor, the list, ranking, generation and imports.

-- name: PairInsert :one
INSERT INTO preference_pairs (
    org_id, prompt, query, system_prompt, chosen_response, rejected_response, preference_strength, context_documents,
    method, chosen_feedback_id, rejected_feedback_id, external_id, annotator_id, annotation_notes, tags, content_hash
) VALUES (
    @org_id, @prompt, @query, @system_prompt, @chosen_response, @rejected_response, @preference_strength, @context_documents,
    @method, sqlc.narg('chosen_feedback_id'), sqlc.narg('rejected_feedback_id'), sqlc.narg('external_id'),
    sqlc.narg('annotator_id'), @annotation_notes, @tags, @content_hash
)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: PairInsertMany :execrows
-- Stores many pairs of one method in one statement. Pairs identical to a
-- stored one (or whose external_id is stored) are left out. Feedback links
-- come as ids, or as the feedback items' external ids (imports).
INSERT INTO preference_pairs (
    org_id, prompt, query, system_prompt, chosen_response, rejected_response, preference_strength, context_documents,
    method, chosen_feedback_id, rejected_feedback_id, external_id, annotator_id, annotation_notes, tags, content_hash
)
SELECT @org_id, u.prompt::jsonb, u.query, u.system_prompt, u.chosen, u.rejected, u.strength, u.context_documents::jsonb,
       @method, coalesce(nullif(u.chosen_id, '')::uuid, cf.id), coalesce(nullif(u.rejected_id, '')::uuid, rf.id),
       nullif(u.external_id, ''), sqlc.narg('annotator_id'), @annotation_notes, @tags, u.content_hash
FROM (
    SELECT unnest(@prompts::text[]) AS prompt, unnest(@queries::text[]) AS query,
           unnest(@system_prompts::text[]) AS system_prompt, unnest(@chosen::text[]) AS chosen,
           unnest(@rejected::text[]) AS rejected, unnest(@strengths::real[]) AS strength,
           unnest(@context_documents::text[]) AS context_documents, unnest(@chosen_ids::text[]) AS chosen_id,
           unnest(@rejected_ids::text[]) AS rejected_id, unnest(@chosen_external_ids::text[]) AS chosen_external_id,
           unnest(@rejected_external_ids::text[]) AS rejected_external_id, unnest(@external_ids::text[]) AS external_id,
           unnest(@content_hashes::bytea[]) AS content_hash
) u
LEFT JOIN feedback cf ON cf.org_id = @org_id AND u.chosen_external_id <> '' AND cf.external_id = u.chosen_external_id
LEFT JOIN feedback rf ON rf.org_id = @org_id AND u.rejected_external_id <> '' AND rf.external_id = u.rejected_external_id
ON CONFLICT DO NOTHING;

-- name: PairListIDsByIdentity :many
-- The organisation's pairs with one of the content hashes or external ids:
-- the pairs an import stored, or found already stored.
SELECT id FROM preference_pairs
WHERE org_id = @org_id AND (content_hash = ANY(@content_hashes::bytea[]) OR external_id = ANY(@external_ids::text[]));

-- name: PairGetByHash :one
SELECT * FROM preference_pairs WHERE org_id = @org_id AND content_hash = @content_hash;

-- name: PairGet :one
SELECT sqlc.embed(p), coalesce(u.email, '')::text AS annotator_email
FROM preference_pairs p
LEFT JOIN users u ON u.id = p.annotator_id
WHERE p.org_id = @org_id AND p.id = @id;

-- name: PairUpdate :one
UPDATE preference_pairs SET
    prompt = @prompt, query = @query, system_prompt = @system_prompt, chosen_response = @chosen_response,
    rejected_response = @rejected_response, preference_strength = @preference_strength,
    context_documents = @context_documents, chosen_feedback_id = sqlc.narg('chosen_feedback_id'),
    rejected_feedback_id = sqlc.narg('rejected_feedback_id'), annotation_notes = @annotation_notes, tags = @tags,
    annotator_id = coalesce(sqlc.narg('annotator_id'), annotator_id),
    content_hash = @content_hash, updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id AND version = @version
RETURNING *;

-- name: PairDelete :one
DELETE FROM preference_pairs WHERE org_id = @org_id AND id = @id RETURNING *;

-- name: PairList :many
SELECT p.id, left(p.query, 300)::text AS query_preview, left(p.chosen_response, 300)::text AS chosen_preview,
       left(p.rejected_response, 300)::text AS rejected_preview, p.preference_strength, p.method,
       p.chosen_feedback_id, p.rejected_feedback_id, p.external_id, p.tags, p.created_at, p.version
FROM preference_pairs p
WHERE p.org_id = @org_id
  AND (sqlc.narg('method')::pair_method IS NULL OR p.method = sqlc.narg('method'))
  AND (@tag::text = '' OR p.tags @> ARRAY[@tag::text])
  AND (@q::text = '' OR p.query ILIKE '%' || @q || '%' OR p.chosen_response ILIKE '%' || @q || '%'
       OR p.rejected_response ILIKE '%' || @q || '%')
  AND (sqlc.narg('feedback_id')::uuid IS NULL OR p.chosen_feedback_id = sqlc.narg('feedback_id')
       OR p.rejected_feedback_id = sqlc.narg('feedback_id'))
  AND (sqlc.narg('dataset_id')::uuid IS NULL OR EXISTS (
       SELECT 1 FROM training_dataset_members m
       WHERE m.org_id = @org_id AND m.dataset_id = sqlc.narg('dataset_id') AND m.pair_id = p.id))
  AND (sqlc.narg('cursor_time')::timestamptz IS NULL
       OR (p.created_at, p.id) < (sqlc.narg('cursor_time'), sqlc.narg('cursor_id')::uuid))
ORDER BY p.created_at DESC, p.id DESC
LIMIT @row_limit;

-- name: PairListByIDs :many
-- Whole pairs for a page the list found, for answers that show each pair
-- as GET /:id does.
SELECT * FROM preference_pairs WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- name: PairListRankCandidates :many
-- The distinct answers the organisation's feedback holds for one normalised
-- query (one per distinct response), for the ranking page.
SELECT DISTINCT ON (f.content_hash) f.id, f.query, f.response, f.rating, f.feedback_type, f.model, f.context, f.created_at
FROM feedback f
WHERE f.org_id = @org_id
  AND md5(lower(btrim(regexp_replace(f.query, '\s+', ' ', 'g')))) = md5(lower(btrim(regexp_replace(@query::text, '\s+', ' ', 'g'))))
  AND f.status <> 'rejected' AND length(btrim(f.response)) > 0
ORDER BY f.content_hash, f.seq
LIMIT @row_limit;

-- name: PairListRankQueries :many
-- Queries whose text holds @search (case-insensitive) and which have at
-- least two different answers to rank, counted as PairListRankCandidates
-- finds them: most answers first, for the ranking page's suggestions.
SELECT min(f.query)::text AS query, count(DISTINCT f.content_hash)::bigint AS answers
FROM feedback f
WHERE f.org_id = @org_id
  AND strpos(lower(f.query), lower(@search::text)) > 0
  AND f.status <> 'rejected' AND length(btrim(f.response)) > 0
GROUP BY md5(lower(btrim(regexp_replace(f.query, '\s+', ' ', 'g'))))
HAVING count(DISTINCT f.content_hash) >= 2
ORDER BY answers DESC, query
LIMIT @row_limit;

-- name: PairListFeedbackByIDs :many
SELECT f.id, f.query, f.response, f.correction, f.context
FROM feedback f
WHERE f.org_id = @org_id AND f.id = ANY(@ids::uuid[]);

-- name: PairCountCandidates :one
-- How many distinct pairs a generation method finds, and how many of those
-- are stored already. With agreed_only, pairs built from feedback whose
-- overlapping review is open or disputed are left out, and counted.
SELECT count(DISTINCT c.content_hash) FILTER (WHERE NOT @agreed_only::bool
           OR (review_settled(c.chosen_feedback_id) AND review_settled(c.rejected_feedback_id)))::bigint AS candidates,
       count(DISTINCT c.content_hash) FILTER (WHERE (NOT @agreed_only::bool
           OR (review_settled(c.chosen_feedback_id) AND review_settled(c.rejected_feedback_id))) AND EXISTS (
           SELECT 1 FROM preference_pairs p WHERE p.org_id = @org_id AND p.content_hash = c.content_hash))::bigint AS existing,
       count(DISTINCT c.content_hash) FILTER (WHERE @agreed_only::bool
           AND NOT (review_settled(c.chosen_feedback_id) AND review_settled(c.rejected_feedback_id)))::bigint AS left_out
FROM pair_candidates(@org_id::uuid, @method::pair_method, @min_gap::real, @w_accuracy::real, @w_helpfulness::real,
                     @w_clarity::real, @w_safety::real, @per_query::integer) c;

-- name: PairListCandidateSample :many
-- A few of the new pairs a method would create, strongest first.
SELECT c.query::text AS query, c.chosen::text AS chosen, c.rejected::text AS rejected, c.strength::real AS strength,
       c.chosen_feedback_id::uuid AS chosen_feedback_id, c.rejected_feedback_id::uuid AS rejected_feedback_id
FROM pair_candidates(@org_id::uuid, @method::pair_method, @min_gap::real, @w_accuracy::real, @w_helpfulness::real,
                     @w_clarity::real, @w_safety::real, @per_query::integer) c
WHERE NOT EXISTS (SELECT 1 FROM preference_pairs p WHERE p.org_id = @org_id AND p.content_hash = c.content_hash)
  AND (NOT @agreed_only::bool OR (review_settled(c.chosen_feedback_id) AND review_settled(c.rejected_feedback_id)))
ORDER BY 4 DESC, 5, 6
LIMIT @row_limit;

-- name: PairInsertGenerated :one
-- Stores every pair a method finds, skipping those already stored, and
-- says how many distinct pairs were found and how many were stored: the
-- candidates are computed once for both.
WITH c AS (
    SELECT p.query::text AS query, p.chosen::text AS chosen, p.rejected::text AS rejected, p.strength::real AS strength,
           p.context_documents::jsonb AS context_documents, p.chosen_feedback_id::uuid AS chosen_feedback_id,
           p.rejected_feedback_id::uuid AS rejected_feedback_id, p.content_hash::bytea AS content_hash
    FROM pair_candidates(@org_id::uuid, @method::pair_method, @min_gap::real, @w_accuracy::real,
                         @w_helpfulness::real, @w_clarity::real, @w_safety::real, @per_query::integer) p
    WHERE NOT @agreed_only::bool OR (review_settled(p.chosen_feedback_id) AND review_settled(p.rejected_feedback_id))
), ins AS (
    INSERT INTO preference_pairs (
        org_id, prompt, query, chosen_response, rejected_response, preference_strength, context_documents,
        method, chosen_feedback_id, rejected_feedback_id, annotator_id, tags, content_hash
    )
    SELECT @org_id, jsonb_build_array(jsonb_build_object('role', 'user', 'content', c.query)), c.query, c.chosen,
           c.rejected, c.strength, c.context_documents, @method, c.chosen_feedback_id, c.rejected_feedback_id,
           sqlc.narg('annotator_id'), @tags, c.content_hash
    FROM c
    ON CONFLICT (org_id, content_hash) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(DISTINCT c.content_hash) FROM c)::bigint AS candidates, (SELECT count(*) FROM ins)::bigint AS created;

-- name: PairCountByMethod :many
SELECT method, count(*)::bigint AS count FROM preference_pairs WHERE org_id = @org_id GROUP BY method ORDER BY method;

-- name: PairListByFeedback :many
-- The pairs built from a feedback item (as its chosen or its rejected
-- reply), newest first, for the item's page.
SELECT id, method, left(query, 200)::text AS query_preview, chosen_feedback_id, rejected_feedback_id, created_at
FROM preference_pairs
WHERE org_id = @org_id AND (chosen_feedback_id = @feedback_id OR rejected_feedback_id = @feedback_id)
ORDER BY created_at DESC, id DESC
LIMIT 100;
