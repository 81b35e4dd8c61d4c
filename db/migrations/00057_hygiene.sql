-- +goose Up
-- Data hygiene before training (seed 001's "remove spam/bot feedback,
-- filter extreme outliers"): internal/hygiene flags items that look like
-- spam, bots or one user's flood, and an item's is_training_data says
-- whether it may become training data. A person's decision
-- (training_set_by names who) outranks the flags: hygiene never changes
-- an item a person decided about.
ALTER TABLE feedback
    ADD COLUMN is_training_data boolean NOT NULL DEFAULT true,
    -- rate_outlier, duplicate_spam, near_duplicate_spam, bot_session
    ADD COLUMN hygiene_flags text[] NOT NULL DEFAULT '{}',
    ADD COLUMN training_set_by text NOT NULL DEFAULT '';

-- "New since the last run": a loop's trigger counts items created or
-- reviewed after its last collect.
CREATE INDEX feedback_org_reviewed_idx ON feedback (org_id, reviewed_at) WHERE reviewed_at IS NOT NULL;
-- Pasted comments: the same comment text on several items, exactly (white
-- space and case aside) or letters alone.
CREATE INDEX feedback_comment_key_idx ON feedback (org_id, md5(lower(btrim(regexp_replace(comment, '\s+', ' ', 'g')))))
    WHERE length(btrim(comment)) >= 20;
CREATE INDEX feedback_comment_letters_idx ON feedback (org_id, md5(regexp_replace(lower(comment), '[^[:alpha:]]+', '', 'g')))
    WHERE length(btrim(comment)) >= 20;
CREATE INDEX feedback_org_session_idx ON feedback (org_id, session_id, created_at) WHERE session_id <> '';
CREATE INDEX feedback_org_end_user_idx ON feedback (org_id, end_user_id, created_at) WHERE end_user_id <> '';

-- Pair generation leaves out what may not be training data, as it leaves
-- out rejected items and exact duplicates.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pair_candidates(p_org uuid, p_method pair_method, p_min_gap real, p_w_accuracy real, p_w_helpfulness real,
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
          AND f.status <> 'rejected' AND f.duplicate_of IS NULL AND f.is_training_data
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
          AND f.status <> 'rejected' AND f.duplicate_of IS NULL AND f.is_training_data
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pair_candidates(p_org uuid, p_method pair_method, p_min_gap real, p_w_accuracy real, p_w_helpfulness real,
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
DROP INDEX feedback_org_end_user_idx;
DROP INDEX feedback_org_session_idx;
DROP INDEX feedback_comment_letters_idx;
DROP INDEX feedback_comment_key_idx;
DROP INDEX feedback_org_reviewed_idx;
ALTER TABLE feedback DROP COLUMN training_set_by, DROP COLUMN hygiene_flags, DROP COLUMN is_training_data;
