-- RLAIF: the samples a policy-training run had Curate score (internal/rlaif).

-- name: RlaifSampleInsert :one
INSERT INTO rlaif_samples (org_id, job_id, step, prompt, completion, red_team, components, reward, invalid, teacher_score,
    rules_score, conflict, teacher_calls, teacher_cost_micros)
VALUES (@org_id, @job_id, @step, @prompt, @completion, @red_team, @components, sqlc.narg('reward'), @invalid, sqlc.narg('teacher_score'),
    sqlc.narg('rules_score'), @conflict, @teacher_calls, @teacher_cost_micros)
RETURNING id;

-- name: RlaifConflictInsert :exec
-- A sample whose teacher and rules disagree, queued for experts; once per
-- run for the same prompt and completion (a later step sampling it again
-- adds nothing to the queue).
INSERT INTO judge_conflicts (org_id, rlaif_sample_id, human_score, judge_score, judge_safety_flag, critique)
SELECT s.org_id, s.id, @rules_score, @teacher_score, @teacher_safety_flag, @critique
FROM rlaif_samples s
WHERE s.org_id = @org_id AND s.id = @rlaif_sample_id
  AND NOT EXISTS (SELECT 1 FROM judge_conflicts c JOIN rlaif_samples o ON o.id = c.rlaif_sample_id
      WHERE o.job_id = s.job_id AND o.prompt = s.prompt AND o.completion = s.completion)
ON CONFLICT (rlaif_sample_id) DO NOTHING;

-- name: RlaifStepList :many
-- A run's samples by step: how many, how many had a reward, the mean
-- reward and each component's mean (valid scores only), and the conflicts.
SELECT s.step, count(*)::bigint AS samples, count(s.reward)::bigint AS rewarded,
       coalesce(avg(s.reward), 0)::float8 AS mean_reward,
       count(*) FILTER (WHERE s.conflict)::bigint AS conflicts,
       (SELECT coalesce(jsonb_object_agg(c.name, c.mean), '{}')::jsonb FROM (
           SELECT e.name, avg((e.score->>'value')::float8) AS mean
           FROM rlaif_samples s2 CROSS JOIN LATERAL jsonb_each(s2.components) AS e(name, score)
           WHERE s2.job_id = s.job_id AND s2.step = s.step AND coalesce(e.score->>'invalid', '') = ''
           GROUP BY e.name) c) AS components
FROM rlaif_samples s
WHERE s.org_id = @org_id AND s.job_id = @job_id
GROUP BY s.job_id, s.step
ORDER BY s.step;

-- name: RlaifSpendGet :one
-- What the teacher cost a run, and how many of its samples conflicted.
SELECT count(*)::bigint AS samples, coalesce(sum(teacher_calls), 0)::bigint AS teacher_calls,
       coalesce(sum(teacher_cost_micros), 0)::bigint AS teacher_cost_micros,
       count(*) FILTER (WHERE conflict)::bigint AS conflicts,
       count(*) FILTER (WHERE red_team)::bigint AS red_team
FROM rlaif_samples WHERE org_id = @org_id AND job_id = @job_id;
