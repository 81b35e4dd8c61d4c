-- +goose Up
-- A reward model is a version of its own kind: a sequence classifier that
-- scores an answer (what the local REWARD stage trains, or one registered
-- by hand). It is served by a vLLM server started with the pooling runner
-- (vllm serve <model> --runner pooling), a target of its own kind: such a
-- server serves the one model it was started with and loads nothing.
ALTER TABLE model_versions DROP CONSTRAINT model_versions_kind_check;
ALTER TABLE model_versions ADD CONSTRAINT model_versions_kind_check CHECK (kind IN ('full', 'lora', 'reward'));
ALTER TABLE serving_targets DROP CONSTRAINT serving_targets_kind_check;
ALTER TABLE serving_targets ADD CONSTRAINT serving_targets_kind_check CHECK (kind IN ('vllm', 'openai', 'webhook', 'vllm_pooling'));

-- A reward model's scores, kept like the judge's: by a hash of the version
-- and the conversation scored, so scoring the same answer again costs no
-- call. raw is the model's own output (a logit), before Curate maps it to
-- 0–1.
CREATE TABLE reward_model_cache (
    org_id     uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    key        bytea NOT NULL,
    version_id uuid NOT NULL,
    raw        double precision NOT NULL CHECK (raw BETWEEN -1e300 AND 1e300),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, key),
    FOREIGN KEY (org_id, version_id) REFERENCES model_versions (org_id, id) ON DELETE CASCADE
);
CREATE INDEX reward_model_cache_version ON reward_model_cache (version_id);

-- +goose Down
DROP TABLE reward_model_cache;
DELETE FROM model_versions WHERE kind = 'reward';
DELETE FROM deployments d USING serving_targets t WHERE t.org_id = d.org_id AND t.id = d.target_id AND t.kind = 'vllm_pooling';
DELETE FROM serving_targets WHERE kind = 'vllm_pooling';
ALTER TABLE serving_targets DROP CONSTRAINT serving_targets_kind_check;
ALTER TABLE serving_targets ADD CONSTRAINT serving_targets_kind_check CHECK (kind IN ('vllm', 'openai', 'webhook'));
ALTER TABLE model_versions DROP CONSTRAINT model_versions_kind_check;
ALTER TABLE model_versions ADD CONSTRAINT model_versions_kind_check CHECK (kind IN ('full', 'lora'));
