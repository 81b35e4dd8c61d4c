-- +goose Up
-- Local training: the methods only the local trainer offers, and the
-- settings of a local job (LoRA, learning rate, IRS) that Curate's shared
-- hyperparameters do not name, as local.Settings in JSON ('{}' elsewhere).
ALTER TABLE fine_tuning_jobs DROP CONSTRAINT fine_tuning_jobs_method_check;
ALTER TABLE fine_tuning_jobs ADD CONSTRAINT fine_tuning_jobs_method_check
    CHECK (method IN ('supervised', 'dpo', 'reward', 'irs'));
ALTER TABLE fine_tuning_jobs ADD COLUMN local_settings jsonb NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE fine_tuning_jobs DROP COLUMN local_settings;
ALTER TABLE fine_tuning_jobs DROP CONSTRAINT fine_tuning_jobs_method_check;
ALTER TABLE fine_tuning_jobs ADD CONSTRAINT fine_tuning_jobs_method_check
    CHECK (method IN ('supervised', 'dpo'));
