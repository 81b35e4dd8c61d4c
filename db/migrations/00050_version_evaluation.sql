-- +goose Up
-- A version carries its evaluation: the summary of its newest finished
-- quality evaluation (internal/models.Evaluation as JSON: the run, the
-- golden set with its content hash, the mean reward and its interval,
-- each split's, the judge's calls and cost), written in the transaction
-- that finishes the run. NULL until one finished.
ALTER TABLE model_versions ADD COLUMN evaluation jsonb;

-- Versions evaluated before: their newest finished run. Split intervals
-- were never computed for these (a bootstrap is not SQL), so they stay
-- null; a later run writes them.
UPDATE model_versions v SET evaluation = e.summary
FROM (
    SELECT DISTINCT ON (r.candidate_version_id) r.candidate_version_id AS version_id,
        jsonb_build_object(
            'run_id', r.id,
            'golden_set_version_id', r.golden_set_version_id,
            'golden_set', coalesce(g.name, d.name || ' v' || dv.number),
            'golden_set_hash', dv.content_hash,
            'mean_reward', r.mean_reward,
            'ci', CASE WHEN r.ci_low IS NULL THEN NULL ELSE jsonb_build_array(r.ci_low, r.ci_high) END,
            'items', r.done,
            'invalid', r.invalid,
            'splits', coalesce((
                SELECT jsonb_agg(jsonb_build_object('split', s.split, 'items', s.items, 'mean_reward', s.mean, 'ci', NULL)
                                 ORDER BY s.split = 'red_team', s.split)
                FROM (SELECT i.split, count(*) AS items, avg(i.reward) AS mean
                      FROM evaluation_items i WHERE i.run_id = r.id GROUP BY i.split) s), '[]'::jsonb),
            'judge_calls', r.judge_calls,
            'judge_cost_usd', r.judge_cost_micros / 1e6,
            'answer_cost_usd', r.answer_cost_micros / 1e6,
            'mean_latency_ms', (SELECT round(avg(i.latency_ms)) FROM evaluation_items i WHERE i.run_id = r.id AND i.answer <> ''),
            'formula', coalesce(r.config->>'formula', ''),
            'finished_at', r.finished_at) AS summary
    FROM evaluation_runs r
    JOIN dataset_versions dv ON dv.id = r.golden_set_version_id
    JOIN training_datasets d ON d.id = dv.dataset_id
    LEFT JOIN golden_sets g ON g.version_id = r.golden_set_version_id
    WHERE r.status = 'succeeded' AND r.kind = 'quality' AND r.candidate_version_id IS NOT NULL AND r.finished_at IS NOT NULL
    ORDER BY r.candidate_version_id, r.finished_at DESC
) e
WHERE v.id = e.version_id;

-- performance_metrics (the seed's column) holds what is known of each
-- version: its training loss, validation loss and dataset hash from
-- registration, its eval score and the golden set's hash from its
-- newest evaluation. It was always {} until now.
UPDATE model_versions SET performance_metrics = performance_metrics || jsonb_strip_nulls(jsonb_build_object(
    'training_loss', train_loss,
    'validation_loss', valid_loss,
    'dataset_hash', nullif(dataset_hash, ''),
    'eval_score', evaluation->'mean_reward',
    'eval_ci', evaluation->'ci',
    'golden_set_hash', evaluation->'golden_set_hash',
    'latency_ms', evaluation->'mean_latency_ms'));

-- +goose Down
ALTER TABLE model_versions DROP COLUMN evaluation;
