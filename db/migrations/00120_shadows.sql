-- +goose Up
-- Shadow deployments: a share of the queries answered under a registered
-- model's alias (production, say) is mirrored to a candidate version in the
-- background, and both answers are scored and kept, with no user seeing
-- the candidate's. Ingest does nothing more: a periodic job reads the
-- feedback that arrived since the shadow's cursor under the names the
-- alias's version is served by, samples it by a hash of the feedback's id,
-- and a job per shadow asks the candidate and scores both answers.
CREATE TABLE shadows (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id               uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    registered_model_id  uuid NOT NULL REFERENCES registered_models (id) ON DELETE CASCADE,
    alias                text NOT NULL CHECK (alias <> ''),
    candidate_version_id uuid NOT NULL REFERENCES model_versions (id) ON DELETE CASCADE,
    -- The serving target the candidate is called on; any serving it when
    -- empty.
    target               text NOT NULL DEFAULT '',
    sample               double precision NOT NULL CHECK (sample > 0 AND sample <= 1),
    -- How both answers are scored: the scorers, the judge and the reward
    -- formula, as an evaluation takes them (internal/eval Config).
    config               jsonb NOT NULL,
    formula              text NOT NULL DEFAULT '',
    -- The shadow stops sampling at until, when set.
    until                timestamptz,
    status               text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'stopped')),
    stopped_reason       text NOT NULL DEFAULT '',
    stopped_at           timestamptz,
    -- The newest feedback already sampled, by (created_at, id).
    cursor_at            timestamptz,
    cursor_id            uuid,
    created_by_label     text NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX shadows_org ON shadows (org_id, created_at DESC);
CREATE INDEX shadows_candidate ON shadows (org_id, candidate_version_id);
CREATE INDEX shadows_running ON shadows (created_at) WHERE status = 'running';

-- One mirrored query: the production answer the feedback carries, the
-- candidate's answer and both scorings. Each step is recorded before the
-- next: asked_at before the candidate is asked, its answer before the
-- scorers are, scoring_at before they are asked, so that a query whose
-- worker stopped mid-call is never sent to the candidate or the judge a
-- second time.
CREATE TABLE shadow_queries (
    shadow_id             uuid NOT NULL REFERENCES shadows (id) ON DELETE CASCADE,
    feedback_id           uuid NOT NULL REFERENCES feedback (id) ON DELETE CASCADE,
    org_id                uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- The version the alias served when the query was sampled.
    production_version_id uuid REFERENCES model_versions (id) ON DELETE SET NULL,
    status                text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'answered', 'scored', 'skipped', 'failed')),
    claimed_at            timestamptz,
    asked_at              timestamptz,
    scoring_at            timestamptz,
    candidate_answer      text NOT NULL DEFAULT '',
    candidate_latency_ms  integer NOT NULL DEFAULT 0,
    prompt_tokens         bigint NOT NULL DEFAULT 0,
    completion_tokens     bigint NOT NULL DEFAULT 0,
    -- Each side's scores ({"judge": {"value", "explanation"}}), reward (none
    -- when its scores make none, with the reason), critique and safety flag.
    production_scores     jsonb NOT NULL DEFAULT '{}',
    production_reward     double precision,
    production_invalid    text NOT NULL DEFAULT '',
    production_critique   text NOT NULL DEFAULT '',
    production_safety     boolean NOT NULL DEFAULT false,
    candidate_scores      jsonb NOT NULL DEFAULT '{}',
    candidate_reward      double precision,
    candidate_invalid     text NOT NULL DEFAULT '',
    candidate_critique    text NOT NULL DEFAULT '',
    candidate_safety      boolean NOT NULL DEFAULT false,
    judge_calls           integer NOT NULL DEFAULT 0,
    judge_cost_micros     bigint NOT NULL DEFAULT 0,
    -- Why a query was skipped or failed (the budget spent, the candidate
    -- unreachable, a worker stopped mid-call).
    reason                text NOT NULL DEFAULT '',
    created_at            timestamptz NOT NULL DEFAULT now(),
    scored_at             timestamptz,
    PRIMARY KEY (shadow_id, feedback_id)
);
CREATE INDEX shadow_queries_feedback ON shadow_queries (feedback_id);
CREATE INDEX shadow_queries_open ON shadow_queries (shadow_id, created_at) WHERE status IN ('pending', 'answered');

-- +goose Down
DROP TABLE shadow_queries;
DROP TABLE shadows;
