-- The start page's counts: one small query per card.

-- name: DatasetCountReady :one
-- Datasets frozen into a version that no export has written yet (the
-- status "ready": an export moves it to "exported").
SELECT count(*)::bigint FROM training_datasets WHERE org_id = @org_id AND status = 'ready';

-- name: FineTuneJobCountActive :one
-- Jobs that have not ended: from launch until success, failure or cancel.
SELECT count(*)::bigint FROM fine_tuning_jobs
WHERE org_id = @org_id AND status NOT IN ('succeeded', 'failed', 'cancelled');

-- name: AlertCountOpen :one
-- Alerts that still hold and nobody dismissed: those the banners show.
SELECT count(*)::bigint FROM alerts WHERE org_id = @org_id AND resolved_at IS NULL AND dismissed_at IS NULL;
