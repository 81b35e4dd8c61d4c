-- +goose Up
-- Production monitors, evaluated with the alert rules for every served
-- version: latency p95 over a threshold, feedback rate dropping against
-- the same hours of the previous week, error rate over a threshold, and
-- the live score distribution shifting from the version's first week. An
-- organisation without a row uses the defaults below, the design's.
CREATE TABLE monitor_settings (
    org_id             uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    enabled            boolean NOT NULL DEFAULT true,
    window_hours       integer NOT NULL DEFAULT 1 CHECK (window_hours BETWEEN 1 AND 168),
    min_samples        integer NOT NULL DEFAULT 20 CHECK (min_samples BETWEEN 1 AND 100000),
    latency_p95_ms     integer NOT NULL DEFAULT 2000 CHECK (latency_p95_ms BETWEEN 1 AND 3600000),
    feedback_drop      double precision NOT NULL DEFAULT 0.2 CHECK (feedback_drop > 0 AND feedback_drop < 1),
    error_rate         double precision NOT NULL DEFAULT 0.01 CHECK (error_rate > 0 AND error_rate < 1),
    shift_test         text NOT NULL DEFAULT 'ks' CHECK (shift_test IN ('ks', 'psi')),
    shift_window_hours integer NOT NULL DEFAULT 24 CHECK (shift_window_hours BETWEEN 1 AND 720),
    shift_p_value      double precision NOT NULL DEFAULT 0.01 CHECK (shift_p_value > 0 AND shift_p_value < 1),
    shift_psi          double precision NOT NULL DEFAULT 0.2 CHECK (shift_psi > 0),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check CHECK (kind IN ('low_rating', 'thumbs_down_spike', 'safety',
    'monitor_latency', 'monitor_feedback_rate', 'monitor_error_rate', 'monitor_score_shift'));

-- +goose Down
DELETE FROM alerts WHERE kind LIKE 'monitor\_%';
ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check CHECK (kind IN ('low_rating', 'thumbs_down_spike', 'safety'));
DROP TABLE monitor_settings;
