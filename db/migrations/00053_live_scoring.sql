-- +goose Up
-- Live scoring: answers that arrive as feedback, in an experiment or from
-- a version an alias serves, sampled at a rate and scored in the
-- background by a scorer (a judge template through an endpoint), each
-- score costed as judge calls are. Ingest does nothing more: a periodic
-- job reads the feedback that arrived since its cursor, samples it by a
-- hash of the feedback's id, and scores what it sampled.
CREATE TABLE live_scorers (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id              uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- What is scored: an experiment's feedback, or the feedback of the
    -- version a registered model's alias serves.
    experiment_id       uuid REFERENCES experiments (id) ON DELETE CASCADE,
    registered_model_id uuid REFERENCES registered_models (id) ON DELETE CASCADE,
    alias               text NOT NULL DEFAULT '',
    -- What scores it; a judge template now.
    scorer              text NOT NULL DEFAULT 'judge' CHECK (scorer IN ('judge')),
    endpoint            text NOT NULL CHECK (endpoint <> ''),
    template            text NOT NULL DEFAULT 'default',
    rate                double precision NOT NULL CHECK (rate > 0 AND rate <= 1),
    enabled             boolean NOT NULL DEFAULT true,
    -- The newest feedback already sampled, by (created_at, id).
    cursor_at           timestamptz,
    cursor_id           uuid,
    created_by_label    text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK ((experiment_id IS NULL) <> (registered_model_id IS NULL)),
    CHECK ((registered_model_id IS NULL) = (alias = ''))
);
CREATE UNIQUE INDEX live_scorers_experiment ON live_scorers (experiment_id) WHERE experiment_id IS NOT NULL;
CREATE UNIQUE INDEX live_scorers_alias ON live_scorers (registered_model_id, alias) WHERE registered_model_id IS NOT NULL;
CREATE INDEX live_scorers_org ON live_scorers (org_id);

CREATE TABLE live_scores (
    scorer_id   uuid NOT NULL REFERENCES live_scorers (id) ON DELETE CASCADE,
    feedback_id uuid NOT NULL REFERENCES feedback (id) ON DELETE CASCADE,
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'scored', 'invalid', 'skipped')),
    score       double precision CHECK (score >= 0 AND score <= 1),
    safety_flag boolean NOT NULL DEFAULT false,
    -- Why there is no score: the judge's answer was unusable, or the
    -- budget was spent.
    reason      text NOT NULL DEFAULT '',
    calls       integer NOT NULL DEFAULT 0,
    cost_micros bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    scored_at   timestamptz,
    PRIMARY KEY (scorer_id, feedback_id),
    CHECK ((status = 'scored') = (score IS NOT NULL))
);
CREATE INDEX live_scores_feedback ON live_scores (feedback_id);
CREATE INDEX live_scores_pending ON live_scores (scorer_id, created_at) WHERE status = 'pending';

-- +goose Down
DROP TABLE live_scores;
DROP TABLE live_scorers;
