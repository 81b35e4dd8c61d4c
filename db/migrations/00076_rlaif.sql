-- +goose Up
-- RLAIF: a GRPO or PPO run's reward is the organisation's reward formula,
-- scored by Curate: the rule scorers, the judge as the teacher (cached,
-- within the judge budget, each call logged) and reward models. Every
-- sample a run had scored is kept with its components, its reward and what
-- the teacher cost, so the run's page can show each component by step and
-- the teacher's spend.
CREATE TABLE rlaif_samples (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id              uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    job_id              uuid NOT NULL REFERENCES fine_tuning_jobs (id) ON DELETE CASCADE,
    step                integer NOT NULL CHECK (step >= 0),
    prompt              text NOT NULL,
    completion          text NOT NULL,
    red_team            boolean NOT NULL DEFAULT false,
    -- Each scorer's score by name: {"chain": {"value": 1, ...}, ...}.
    components          jsonb NOT NULL,
    -- NULL with the reason when a component could not be scored.
    reward              double precision,
    invalid             text NOT NULL DEFAULT '',
    -- The teacher's score and the rules' combined score (0–1), when both
    -- were scored; further apart than the run's threshold is a conflict.
    teacher_score       double precision,
    rules_score         double precision,
    conflict            boolean NOT NULL DEFAULT false,
    teacher_calls       integer NOT NULL DEFAULT 0,
    teacher_cost_micros bigint NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rlaif_samples_job ON rlaif_samples (job_id, step);

-- A sample whose teacher and rules disagree goes to the judge-conflicts
-- queue for experts, beside the judge's disagreements with people.
ALTER TABLE judge_conflicts ALTER COLUMN agreement_id DROP NOT NULL;
ALTER TABLE judge_conflicts ALTER COLUMN feedback_id DROP NOT NULL;
ALTER TABLE judge_conflicts ADD COLUMN rlaif_sample_id uuid UNIQUE REFERENCES rlaif_samples (id) ON DELETE CASCADE;
ALTER TABLE judge_conflicts ADD CONSTRAINT judge_conflicts_source CHECK (
    (agreement_id IS NOT NULL AND feedback_id IS NOT NULL AND rlaif_sample_id IS NULL)
    OR (agreement_id IS NULL AND feedback_id IS NULL AND rlaif_sample_id IS NOT NULL));

-- +goose Down
DELETE FROM judge_conflicts WHERE rlaif_sample_id IS NOT NULL;
ALTER TABLE judge_conflicts DROP CONSTRAINT judge_conflicts_source;
ALTER TABLE judge_conflicts DROP COLUMN rlaif_sample_id;
ALTER TABLE judge_conflicts ALTER COLUMN feedback_id SET NOT NULL;
ALTER TABLE judge_conflicts ALTER COLUMN agreement_id SET NOT NULL;
DROP TABLE rlaif_samples;
