-- +goose Up
-- The local trainer's policy-optimisation methods: GRPO, and PPO with a value head.
ALTER TABLE fine_tuning_jobs DROP CONSTRAINT fine_tuning_jobs_method_check;
ALTER TABLE fine_tuning_jobs ADD CONSTRAINT fine_tuning_jobs_method_check
    CHECK (method IN ('supervised', 'dpo', 'reward', 'irs', 'grpo', 'ppo'));

-- +goose Down
ALTER TABLE fine_tuning_jobs DROP CONSTRAINT fine_tuning_jobs_method_check;
ALTER TABLE fine_tuning_jobs ADD CONSTRAINT fine_tuning_jobs_method_check
    CHECK (method IN ('supervised', 'dpo', 'reward', 'irs'));
