-- +goose Up
-- "The same query" for pair generation: the query lowercased with its white
-- space collapsed, hashed so that long queries fit in a B-tree entry. The
-- expression here and in pair_candidates must stay identical for the index
-- to be used.
CREATE INDEX feedback_org_query_key_idx ON feedback (org_id, md5(lower(btrim(regexp_replace(query, '\s+', ' ', 'g')))));

-- pair_candidates computes, set-based, the preference pairs one generation
-- method finds in an organisation's feedback. Rejected items and exact
-- duplicates (duplicate_of set) take no part.
--
-- same_query, threshold and multi_aspect compare items that share a
-- normalised query: the winner's score must beat the loser's by min_gap
-- (rating points, or weighted dimension points; multi_aspect leaves out
-- items missing a dimension's score); threshold instead pairs
-- good items (rating >= 4 or thumbs up) with bad ones (rating <= 2 or thumbs
-- down). Within one query only the per_query best and per_query worst items
-- are paired, so a query asked ten thousand times yields at most per_query²
-- pairs, not a hundred million. correction pairs every corrected item's
-- correction (chosen) with its original response (rejected).
--
-- content_hash is the pair's identity as internal/pairs.ContentHash computes
-- it for a prompt of one user message and no system prompt: sha256 over each
-- field written as "<byte length>:<text>".
-- +goose StatementBegin
CREATE FUNCTION pair_candidates(p_org uuid, p_method pair_method, p_min_gap real, p_w_accuracy real, p_w_helpfulness real,
                                p_w_clarity real, p_w_safety real, p_per_query integer)
RETURNS TABLE (query text, chosen text, rejected text, strength real, context_documents jsonb,
               chosen_feedback_id uuid, rejected_feedback_id uuid, content_hash bytea)
LANGUAGE sql STABLE AS $fn$
    WITH scored AS (
        SELECT f.id, f.seq, f.query, f.response, f.context, f.content_hash AS fb_hash,
               md5(lower(btrim(regexp_replace(f.query, '\s+', ' ', 'g')))) AS qkey,
               CASE p_method
                   WHEN 'same_query' THEN f.rating::real
                   WHEN 'threshold' THEN CASE
                       WHEN f.rating IS NOT NULL THEN f.rating::real
                       WHEN f.feedback_type = 'thumbs_up' THEN 5::real
                       WHEN f.feedback_type = 'thumbs_down' THEN 1::real END
                   WHEN 'multi_aspect' THEN
                       ((p_w_accuracy * f.dim_accuracy + p_w_helpfulness * f.dim_helpfulness
                         + p_w_clarity * f.dim_clarity + p_w_safety * f.dim_safety)
                        / nullif(p_w_accuracy + p_w_helpfulness + p_w_clarity + p_w_safety, 0))::real
               END AS score
        FROM feedback f
        WHERE f.org_id = p_org AND p_method IN ('same_query', 'threshold', 'multi_aspect')
          AND f.status <> 'rejected' AND f.duplicate_of IS NULL
    ), ranked AS (
        SELECT s.*,
               row_number() OVER (PARTITION BY s.qkey ORDER BY s.score DESC, s.seq) AS best,
               row_number() OVER (PARTITION BY s.qkey ORDER BY s.score ASC, s.seq) AS worst
        FROM scored s
        WHERE s.score IS NOT NULL
          AND (p_method <> 'threshold' OR s.score >= 4 OR s.score <= 2)
    ), compared AS (
        SELECT w.query, w.response AS chosen, l.response AS rejected,
               least(1, greatest(0, (w.score - l.score) / 4))::real AS strength,
               w.context, w.id AS chosen_id, l.id AS rejected_id
        FROM ranked w
        JOIN ranked l ON l.qkey = w.qkey AND l.worst <= p_per_query
        WHERE w.best <= p_per_query
          AND w.fb_hash <> l.fb_hash AND w.response <> l.response
          AND CASE WHEN p_method = 'threshold' THEN w.score >= 4 AND l.score <= 2
                   ELSE w.score - l.score >= greatest(p_min_gap - 1e-4, 1e-4) END
        UNION ALL
        SELECT f.query, f.correction, f.response, 1::real, f.context, f.id, f.id
        FROM feedback f
        WHERE f.org_id = p_org AND p_method = 'correction'
          AND f.status <> 'rejected' AND f.duplicate_of IS NULL
          AND length(btrim(f.correction)) > 0 AND f.correction <> f.response
    )
    SELECT c.query, c.chosen, c.rejected, c.strength,
           CASE WHEN jsonb_typeof(c.context -> 'documents') = 'array' THEN c.context -> 'documents' ELSE '[]'::jsonb END,
           c.chosen_id, c.rejected_id,
           sha256(convert_to('0:' || '4:user' || octet_length(c.query) || ':' || c.query
                             || octet_length(c.chosen) || ':' || c.chosen
                             || octet_length(c.rejected) || ':' || c.rejected, 'UTF8'))
    FROM compared c
    WHERE length(btrim(c.chosen)) > 0 AND length(btrim(c.rejected)) > 0
$fn$;
-- +goose StatementEnd

-- Listing pairs by tag and searching them.
CREATE INDEX preference_pairs_tags_idx ON preference_pairs USING gin (tags);

-- +goose Down
DROP INDEX preference_pairs_tags_idx;
DROP FUNCTION pair_candidates;
DROP INDEX feedback_org_query_key_idx;
