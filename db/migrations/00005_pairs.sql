-- +goose Up
CREATE TYPE pair_method AS ENUM ('manual', 'correction', 'same_query', 'threshold', 'multi_aspect', 'ranking', 'import');

-- Human preference comparisons for DPO and reward-model training.
CREATE TABLE preference_pairs (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    seq                  bigint GENERATED ALWAYS AS IDENTITY,
    org_id               uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- The conversation before the compared replies: [{"role","content"}...],
    -- its last message from the user. query is that last user message.
    prompt               jsonb NOT NULL,
    query                text NOT NULL,
    system_prompt        text NOT NULL DEFAULT '',
    chosen_response      text NOT NULL CHECK (length(btrim(chosen_response)) > 0),
    rejected_response    text NOT NULL CHECK (length(btrim(rejected_response)) > 0),
    preference_strength  real NOT NULL DEFAULT 1 CHECK (preference_strength >= 0 AND preference_strength <= 1),
    context_documents    jsonb NOT NULL DEFAULT '[]',
    method               pair_method NOT NULL,
    chosen_feedback_id   uuid REFERENCES feedback (id) ON DELETE SET NULL,
    rejected_feedback_id uuid REFERENCES feedback (id) ON DELETE SET NULL,
    external_id          text,
    annotator_id         uuid REFERENCES users (id) ON DELETE SET NULL,
    annotation_notes     text NOT NULL DEFAULT '',
    tags                 text[] NOT NULL DEFAULT '{}',
    -- sha256 over (prompt, chosen, rejected): an identical pair is never stored twice.
    content_hash         bytea NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    version              integer NOT NULL DEFAULT 1,
    CHECK (chosen_response <> rejected_response)
);
CREATE UNIQUE INDEX preference_pairs_content_key ON preference_pairs (org_id, content_hash);
CREATE UNIQUE INDEX preference_pairs_external_id_key ON preference_pairs (org_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX preference_pairs_org_created_idx ON preference_pairs (org_id, created_at DESC, id DESC);
CREATE INDEX preference_pairs_org_method_idx ON preference_pairs (org_id, method, created_at DESC);
CREATE INDEX preference_pairs_chosen_fb_idx ON preference_pairs (chosen_feedback_id) WHERE chosen_feedback_id IS NOT NULL;
CREATE INDEX preference_pairs_rejected_fb_idx ON preference_pairs (rejected_feedback_id) WHERE rejected_feedback_id IS NOT NULL;

-- +goose Down
DROP TABLE preference_pairs;
DROP TYPE pair_method;
