-- +goose Up
-- How experiments are analysed. An organisation chooses its default
-- statistics engine and an experiment may name its own; an experiment says
-- how many days before a unit's first exposure its earlier feedback is read
-- as CUPED's covariate (0 turns variance reduction off), how its goal
-- metrics and its guardrails are corrected for being tested together, each
-- metric's practical criterion (a goal metric's minimum improvement, a
-- guardrail's maximum harm, relative: {"thumbs_up_rate": 0.05}) and the
-- Bayesian engine's thresholds for a deploy.
ALTER TABLE organizations ADD COLUMN experiment_engine text NOT NULL DEFAULT 'frequentist'
    CHECK (experiment_engine IN ('frequentist', 'bayesian'));

ALTER TABLE experiments
    ADD COLUMN engine text NOT NULL DEFAULT '' CHECK (engine IN ('', 'frequentist', 'bayesian')),
    ADD COLUMN cuped_days integer NOT NULL DEFAULT 14 CHECK (cuped_days BETWEEN 0 AND 90),
    ADD COLUMN goal_correction text NOT NULL DEFAULT 'bh' CHECK (goal_correction IN ('none', 'holm', 'bh')),
    ADD COLUMN guardrail_correction text NOT NULL DEFAULT 'holm' CHECK (guardrail_correction IN ('none', 'holm', 'bh')),
    ADD COLUMN criteria jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(criteria) = 'object'),
    ADD COLUMN chance_to_win double precision NOT NULL DEFAULT 0.95 CHECK (chance_to_win >= 0.5 AND chance_to_win < 1),
    ADD COLUMN max_risk double precision NOT NULL DEFAULT 0.0025 CHECK (max_risk > 0 AND max_risk <= 1);

-- Feedback may say that the answer was an error (the assistant failed to
-- give one): the production monitors' error rate counts it.
ALTER TABLE feedback ADD COLUMN is_error boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE feedback DROP COLUMN is_error;
ALTER TABLE experiments DROP COLUMN engine, DROP COLUMN cuped_days, DROP COLUMN goal_correction, DROP COLUMN guardrail_correction,
    DROP COLUMN criteria, DROP COLUMN chance_to_win, DROP COLUMN max_risk;
ALTER TABLE organizations DROP COLUMN experiment_engine;
