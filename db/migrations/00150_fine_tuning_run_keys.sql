-- +goose Up
-- The API key a local GRPO or PPO run with RLAIF holds to fetch its reward
-- from POST /api/train/:id/rewards: made when the trainer starts (a start
-- tried again replaces it), revoked when the job ends.
CREATE TABLE fine_tuning_run_keys (
    job_id     uuid PRIMARY KEY REFERENCES fine_tuning_jobs (id) ON DELETE CASCADE,
    org_id     uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    api_key_id uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE fine_tuning_run_keys;
