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
