-- +goose Up
-- OpenAI-compatible chat endpoints an admin registers (a judge such as
-- DeepSeek, or a model to evaluate), the judge's prompt templates, its
-- cache and usage log, its monthly budget, judge-versus-human agreement
-- runs with their conflict queue, and the log of best-of-N answers.

CREATE TABLE endpoints (
    id                       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id                   uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name                     text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    -- Ends in the API version ("https://api.deepseek.com/v1").
    base_url                 text NOT NULL,
    model                    text NOT NULL,
    -- Sealed with the server's secret key; never shown again.
    api_key_ciphertext       bytea,
    api_key_nonce            bytea,
    -- US dollars per million tokens.
    price_per_million_input  double precision NOT NULL DEFAULT 0 CHECK (price_per_million_input >= 0),
    price_per_million_output double precision NOT NULL DEFAULT 0 CHECK (price_per_million_output >= 0),
    -- Generation settings for answers asked of this endpoint.
    temperature              double precision NOT NULL DEFAULT 0 CHECK (temperature BETWEEN 0 AND 2),
    max_tokens               integer NOT NULL DEFAULT 1024 CHECK (max_tokens BETWEEN 1 AND 32768),
    concurrency              integer NOT NULL DEFAULT 4 CHECK (concurrency BETWEEN 1 AND 64),
    created_by_label         text NOT NULL DEFAULT '',
    created_at               timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name),
    CHECK ((api_key_ciphertext IS NULL) = (api_key_nonce IS NULL))
);

-- A judge prompt template's versions; a version never changes (cached
-- judgements are keyed by it). Without a row, "default" is the built-in
-- template, version 1.
CREATE TABLE judge_templates (
    org_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    version          integer NOT NULL CHECK (version >= 1),
    body             text NOT NULL,
    created_by_label text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, name, version)
);
CREATE TRIGGER judge_templates_no_update BEFORE UPDATE ON judge_templates
    FOR EACH ROW EXECUTE FUNCTION reward_formulas_immutable();

-- A judgement, by hash of (template body, judge model, input): asking again
-- costs nothing. A judgement the judge could not give in the right shape
-- is kept as invalid, with its reason, never as a score.
CREATE TABLE judge_cache (
    org_id         uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    key            bytea NOT NULL,
    score          double precision CHECK (score BETWEEN 0 AND 1),
    safety_flag    boolean NOT NULL DEFAULT false,
    critique       text NOT NULL DEFAULT '',
    invalid_reason text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, key),
    CHECK ((score IS NULL) = (invalid_reason <> ''))
);

-- Every call to a judge (the seed's teacher usage log): tokens, cost and
-- latency, for audit and the monthly budget.
CREATE TABLE judge_calls (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id            uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    endpoint          text NOT NULL,
    model             text NOT NULL,
    template          text NOT NULL,
    template_version  integer NOT NULL,
    purpose           text NOT NULL DEFAULT '',
    prompt_tokens     bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    cost_micros       bigint NOT NULL DEFAULT 0,
    latency_ms        integer NOT NULL DEFAULT 0,
    -- ok, malformed (an answer not in the asked shape) or failed.
    outcome           text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX judge_calls_org_created ON judge_calls (org_id, created_at);

-- An organisation's monthly judge budget; without a row the server's
-- default (CURATE_JUDGE_BUDGET_USD) applies.
CREATE TABLE judge_budgets (
    org_id           uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    monthly_micros   bigint NOT NULL CHECK (monthly_micros >= 0),
    updated_by_label text NOT NULL DEFAULT '',
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- The judge run over human-rated feedback (a filter of the queue):
-- agreement with the humans, and the items where they disagree. A River
-- job does the judging; judgements are cached, so a job that restarts
-- pays for nothing twice.
CREATE TABLE judge_agreements (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id            uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    endpoint          text NOT NULL,
    template          text NOT NULL,
    template_version  integer NOT NULL,
    -- The queue's filter, as its query string.
    filter            text NOT NULL DEFAULT '',
    -- A judge score and a human score (a rating 1–5 read as 0–1, thumbs
    -- as 0 or 1) further apart than this are a conflict.
    threshold         double precision NOT NULL CHECK (threshold > 0 AND threshold <= 1),
    -- At most this many of the newest matching items are judged.
    item_limit        integer NOT NULL CHECK (item_limit BETWEEN 1 AND 5000),
    status            evaluation_status NOT NULL DEFAULT 'queued',
    total             integer NOT NULL DEFAULT 0,
    done              integer NOT NULL DEFAULT 0,
    invalid           integer NOT NULL DEFAULT 0,
    spearman          double precision,
    -- Cohen's kappa on thumbs (a judge score of 0.5 or more is a thumbs
    -- up) with its table: stats.Agreement as JSON.
    kappa             double precision,
    agreement         jsonb,
    conflicts         integer NOT NULL DEFAULT 0,
    judge_calls       integer NOT NULL DEFAULT 0,
    judge_cost_micros bigint NOT NULL DEFAULT 0,
    paused_reason     text NOT NULL DEFAULT '',
    error             text NOT NULL DEFAULT '',
    river_job_id      bigint,
    created_by_label  text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz
);
CREATE INDEX judge_agreements_org_created ON judge_agreements (org_id, created_at DESC);

CREATE TYPE conflict_resolution AS ENUM ('judge_right', 'human_right', 'both_wrong');

CREATE TABLE judge_conflicts (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id            uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    agreement_id      uuid NOT NULL REFERENCES judge_agreements (id) ON DELETE CASCADE,
    feedback_id       uuid NOT NULL REFERENCES feedback (id) ON DELETE CASCADE,
    human_score       double precision NOT NULL,
    judge_score       double precision NOT NULL,
    judge_safety_flag boolean NOT NULL DEFAULT false,
    critique          text NOT NULL DEFAULT '',
    resolution        conflict_resolution,
    note              text NOT NULL DEFAULT '',
    resolved_by_label text NOT NULL DEFAULT '',
    resolved_at       timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (agreement_id, feedback_id)
);
CREATE INDEX judge_conflicts_open ON judge_conflicts (org_id, created_at DESC) WHERE resolution IS NULL;

-- Each best-of-N answer: the candidates, their scores and the selection.
-- Feedback posted later with trace_id set to the response id links to it.
CREATE TABLE best_of_n_responses (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id            uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    query             text NOT NULL,
    context           jsonb NOT NULL DEFAULT '{}',
    scorer            jsonb NOT NULL,
    selection         text NOT NULL,
    generation_method text NOT NULL,
    -- [{"text", "score", "explanation", "invalid"}], in the order given.
    candidates        jsonb NOT NULL,
    selected          integer NOT NULL,
    reward_score      double precision NOT NULL,
    created_by_label  text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX best_of_n_responses_org_created ON best_of_n_responses (org_id, created_at DESC);
-- Feedback on a logged answer carries its response id as trace_id.
CREATE INDEX feedback_org_trace ON feedback (org_id, trace_id) WHERE trace_id <> '';

-- What each evaluated answer cost to generate, and how its reward was
-- summed.
ALTER TABLE evaluation_items
    ADD COLUMN reward_explanation text NOT NULL DEFAULT '',
    ADD COLUMN prompt_tokens      bigint NOT NULL DEFAULT 0,
    ADD COLUMN completion_tokens  bigint NOT NULL DEFAULT 0,
    ADD COLUMN answer_cost_micros bigint NOT NULL DEFAULT 0,
    ADD COLUMN latency_ms         integer NOT NULL DEFAULT 0;
ALTER TABLE evaluation_runs ADD COLUMN answer_cost_micros bigint NOT NULL DEFAULT 0;

-- A leak check is an evaluation of its own kind: the version is asked its
-- training prompts, and an answer that repeats a long verbatim run of a
-- training answer, or training personal data, is flagged. The gate may
-- require a clean one.
ALTER TABLE evaluation_runs ADD COLUMN kind text NOT NULL DEFAULT 'quality' CHECK (kind IN ('quality', 'leak'));
ALTER TABLE evaluation_gates
    ADD COLUMN leak_check     boolean NOT NULL DEFAULT false,
    ADD COLUMN leak_min_words integer NOT NULL DEFAULT 50 CHECK (leak_min_words BETWEEN 8 AND 1000);

-- +goose Down
ALTER TABLE evaluation_gates DROP COLUMN leak_check, DROP COLUMN leak_min_words;
ALTER TABLE evaluation_runs DROP COLUMN kind;
ALTER TABLE evaluation_runs DROP COLUMN answer_cost_micros;
ALTER TABLE evaluation_items DROP COLUMN reward_explanation, DROP COLUMN prompt_tokens, DROP COLUMN completion_tokens,
    DROP COLUMN answer_cost_micros, DROP COLUMN latency_ms;
DROP INDEX feedback_org_trace;
DROP TABLE best_of_n_responses;
DROP TABLE judge_conflicts;
DROP TYPE conflict_resolution;
DROP TABLE judge_agreements;
DROP TABLE judge_budgets;
DROP TABLE judge_calls;
DROP TABLE judge_cache;
DROP TABLE judge_templates;
DROP TABLE endpoints;
