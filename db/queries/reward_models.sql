-- Reward models' scores (internal/rewardmodel).

-- name: RewardModelCacheList :many
-- The cached scores among the given keys.
SELECT key, raw FROM reward_model_cache WHERE org_id = @org_id AND key = ANY(@keys::bytea[]);

-- name: RewardModelCacheInsertMany :exec
-- One version's new scores, in one statement; a key stored meanwhile by
-- another caller keeps its score.
INSERT INTO reward_model_cache (org_id, key, version_id, raw)
SELECT @org_id::uuid, k.key, @version_id::uuid, r.raw
FROM unnest(@keys::bytea[]) WITH ORDINALITY AS k(key, i)
JOIN unnest(@raws::float8[]) WITH ORDINALITY AS r(raw, j) ON r.j = k.i
ON CONFLICT (org_id, key) DO NOTHING;

-- name: RewardModelCallInsertMany :exec
-- The requests one batch sent a version's server: each one's latency and
-- its score (none where ok is false: the server could not score).
INSERT INTO reward_model_calls (org_id, version_id, purpose, latency_ms, score)
SELECT @org_id::uuid, @version_id::uuid, @purpose::text, l.latency_ms, CASE WHEN o.ok THEN s.score END
FROM unnest(@latencies::float8[]) WITH ORDINALITY AS l(latency_ms, i)
JOIN unnest(@scores::float8[]) WITH ORDINALITY AS s(score, j) ON s.j = l.i
JOIN unnest(@oks::bool[]) WITH ORDINALITY AS o(ok, k) ON o.k = l.i;
