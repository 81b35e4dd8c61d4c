-- Data hygiene (internal/hygiene): flags on feedback that look like spam,
-- bots or one user's flood. Each statement judges the items created since
-- a time, with the earlier items they are compared to, and adds its flag
-- to every item it finds; an item flagged is no training data unless a
-- person decided otherwise (training_set_by).

-- name: HygieneUpdateRateOutliers :execrows
-- An end user who sent more than min_items items in a UTC day, and more
-- than factor times the median of that day's users: the user's items of
-- that day.
WITH params AS (
    SELECT @min_items::int AS min_items, @factor::float8 AS factor
), days AS (
    SELECT DISTINCT date_trunc('day', f.created_at, 'UTC') AS day
    FROM feedback f WHERE f.org_id = @org_id AND f.created_at >= @since
), per_user AS (
    SELECT f.end_user_id, d.day, count(*) AS n
    FROM days d
    JOIN feedback f ON f.org_id = @org_id AND f.end_user_id <> ''
                   AND f.created_at >= d.day AND f.created_at < d.day + interval '1 day'
    GROUP BY f.end_user_id, d.day
), medians AS (
    SELECT day, percentile_cont(0.5) WITHIN GROUP (ORDER BY n) AS median FROM per_user GROUP BY day
), outliers AS (
    SELECT u.end_user_id, u.day FROM per_user u JOIN medians m ON m.day = u.day CROSS JOIN params
    WHERE u.n > params.min_items AND u.n > params.factor * m.median
)
UPDATE feedback f SET hygiene_flags = array_append(f.hygiene_flags, 'rate_outlier'),
    is_training_data = CASE WHEN f.training_set_by = '' THEN false ELSE f.is_training_data END
FROM outliers o
WHERE f.org_id = @org_id AND f.end_user_id = o.end_user_id
  AND f.created_at >= o.day AND f.created_at < o.day + interval '1 day'
  AND NOT f.hygiene_flags @> ARRAY['rate_outlier'];

-- name: HygieneUpdateDuplicateComments :execrows
-- The same comment of 20 characters or more (white space and case aside)
-- on min_repeats items or more: pasted text.
WITH keys AS (
    SELECT DISTINCT md5(lower(btrim(regexp_replace(f.comment, '\s+', ' ', 'g')))) AS k
    FROM feedback f
    WHERE f.org_id = @org_id AND f.created_at >= @since AND length(btrim(f.comment)) >= 20
), repeated AS (
    SELECT keys.k FROM keys
    WHERE (SELECT count(*) FROM feedback f
           WHERE f.org_id = @org_id AND length(btrim(f.comment)) >= 20
             AND md5(lower(btrim(regexp_replace(f.comment, '\s+', ' ', 'g')))) = keys.k) >= @min_repeats::int
)
UPDATE feedback f SET hygiene_flags = array_append(f.hygiene_flags, 'duplicate_spam'),
    is_training_data = CASE WHEN f.training_set_by = '' THEN false ELSE f.is_training_data END
WHERE f.org_id = @org_id AND length(btrim(f.comment)) >= 20
  AND md5(lower(btrim(regexp_replace(f.comment, '\s+', ' ', 'g')))) IN (SELECT k FROM repeated)
  AND NOT f.hygiene_flags @> ARRAY['duplicate_spam'];

-- name: HygieneUpdateNearDuplicateComments :execrows
-- The same comment's letters (digits, punctuation, white space and case
-- aside: "Great!! #1", "great 2") on min_repeats items or more, where the
-- exact text differs.
WITH keys AS (
    SELECT DISTINCT md5(regexp_replace(lower(f.comment), '[^[:alpha:]]+', '', 'g')) AS k
    FROM feedback f
    WHERE f.org_id = @org_id AND f.created_at >= @since AND length(btrim(f.comment)) >= 20
      AND length(regexp_replace(lower(f.comment), '[^[:alpha:]]+', '', 'g')) >= 10
), repeated AS (
    SELECT keys.k FROM keys
    WHERE (SELECT count(*) FROM feedback f
           WHERE f.org_id = @org_id AND length(btrim(f.comment)) >= 20
             AND md5(regexp_replace(lower(f.comment), '[^[:alpha:]]+', '', 'g')) = keys.k) >= @min_repeats::int
)
UPDATE feedback f SET hygiene_flags = array_append(f.hygiene_flags, 'near_duplicate_spam'),
    is_training_data = CASE WHEN f.training_set_by = '' THEN false ELSE f.is_training_data END
WHERE f.org_id = @org_id AND length(btrim(f.comment)) >= 20
  AND md5(regexp_replace(lower(f.comment), '[^[:alpha:]]+', '', 'g')) IN (SELECT k FROM repeated)
  AND NOT f.hygiene_flags && ARRAY['duplicate_spam', 'near_duplicate_spam'];

-- name: HygieneUpdateBotSessions :execrows
-- A session of min_requests requests or more (items stored together, as a
-- batch is, count once) whose median time between requests is under
-- max_median_gap seconds: no person reads and rates answers that fast.
WITH sessions AS (
    SELECT DISTINCT f.session_id FROM feedback f
    WHERE f.org_id = @org_id AND f.created_at >= @since AND f.session_id <> ''
), stamps AS (
    SELECT DISTINCT f.session_id, f.created_at FROM feedback f
    WHERE f.org_id = @org_id AND f.session_id IN (SELECT session_id FROM sessions)
), gaps AS (
    SELECT s.session_id,
           extract(epoch FROM s.created_at - lag(s.created_at) OVER (PARTITION BY s.session_id ORDER BY s.created_at)) AS gap
    FROM stamps s
), bots AS (
    SELECT g.session_id FROM gaps g WHERE g.gap IS NOT NULL
    GROUP BY g.session_id
    HAVING count(*) + 1 >= @min_requests::int
       AND percentile_cont(0.5) WITHIN GROUP (ORDER BY g.gap) < @max_median_gap::float8
)
UPDATE feedback f SET hygiene_flags = array_append(f.hygiene_flags, 'bot_session'),
    is_training_data = CASE WHEN f.training_set_by = '' THEN false ELSE f.is_training_data END
FROM bots b
WHERE f.org_id = @org_id AND f.session_id = b.session_id
  AND NOT f.hygiene_flags @> ARRAY['bot_session'];

-- name: HygieneUpdateTrainingData :one
-- A person decides whether an item may be training data; hygiene leaves
-- their decision alone from then on.
UPDATE feedback SET is_training_data = @is_training_data, training_set_by = @set_by,
    updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id
RETURNING id, is_training_data, hygiene_flags, training_set_by, version;

-- name: HygieneUpdateUndecided :one
-- The person's decision is withdrawn: the flags decide again.
UPDATE feedback SET is_training_data = (hygiene_flags = '{}'), training_set_by = '',
    updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id
RETURNING id, is_training_data, hygiene_flags, training_set_by, version;

-- name: HygieneListOrgIDs :many
-- The organisations a periodic check looks at, each through its own
-- indexed statements.
SELECT id FROM organizations ORDER BY id;
