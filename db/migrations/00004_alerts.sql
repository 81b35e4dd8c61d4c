-- +goose Up
-- Alert rules per organisation; an organisation without a row uses the
-- defaults below (the application reads them from the same place).
CREATE TABLE alert_settings (
    org_id            uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    enabled           boolean NOT NULL DEFAULT true,
    rating_threshold  double precision NOT NULL DEFAULT 3.5 CHECK (rating_threshold > 1 AND rating_threshold <= 5),
    min_ratings       integer NOT NULL DEFAULT 10 CHECK (min_ratings >= 1),
    window_hours      integer NOT NULL DEFAULT 24 CHECK (window_hours BETWEEN 1 AND 720),
    baseline_days     integer NOT NULL DEFAULT 7 CHECK (baseline_days BETWEEN 1 AND 90),
    spike_factor      double precision NOT NULL DEFAULT 2 CHECK (spike_factor > 1),
    spike_min_count   integer NOT NULL DEFAULT 5 CHECK (spike_min_count >= 1),
    webhook_url       text NOT NULL DEFAULT '',
    -- The signing key must be readable to sign deliveries (HMAC), so it is
    -- kept as it is; the settings page shows it only when it is generated.
    webhook_secret    text NOT NULL DEFAULT '',
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE alerts (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id               uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kind                 text NOT NULL CHECK (kind IN ('low_rating', 'thumbs_down_spike', 'safety')),
    severity             text NOT NULL CHECK (severity IN ('warn', 'bad')),
    -- One open alert per condition: the evaluator finds it again by this key
    -- instead of opening a second one on every run.
    dedup_key            text NOT NULL,
    title                text NOT NULL,
    message              text NOT NULL,
    details              jsonb NOT NULL DEFAULT '{}',
    opened_at            timestamptz NOT NULL DEFAULT now(),
    last_seen_at         timestamptz NOT NULL DEFAULT now(),
    resolved_at          timestamptz,
    dismissed_at         timestamptz,
    dismissed_by         uuid REFERENCES users (id) ON DELETE SET NULL,
    webhook_delivered_at timestamptz
);

CREATE UNIQUE INDEX alerts_open_key ON alerts (org_id, dedup_key) WHERE resolved_at IS NULL;
-- The banners on every page: open and not dismissed.
CREATE INDEX alerts_banner_idx ON alerts (org_id, opened_at DESC) WHERE resolved_at IS NULL AND dismissed_at IS NULL;
CREATE INDEX alerts_org_opened_idx ON alerts (org_id, opened_at DESC, id DESC);

-- +goose Down
DROP TABLE alerts;
DROP TABLE alert_settings;
