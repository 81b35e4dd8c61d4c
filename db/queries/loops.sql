-- Loop policies and their runs (internal/loops).

-- name: LoopInsert :one
INSERT INTO loop_policies (org_id, name, registered_model, spec, min_new_items, schedule, created_by_label)
VALUES (@org_id, @name, @registered_model, @spec, @min_new_items, @schedule, @created_by_label)
RETURNING *;

-- name: LoopGet :one
SELECT * FROM loop_policies WHERE org_id = @org_id AND id = @id;

-- name: LoopGetForUpdate :one
SELECT * FROM loop_policies WHERE org_id = @org_id AND id = @id FOR UPDATE;

-- name: LoopUpdate :one
-- Optimistic locking: the write happens only if the version still matches.
UPDATE loop_policies SET name = @name, registered_model = @registered_model, spec = @spec,
    min_new_items = @min_new_items, schedule = @schedule, updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id AND version = @version
RETURNING *;

-- name: LoopUpdateStatus :one
UPDATE loop_policies SET status = @status, updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id
RETURNING *;

-- name: LoopList :many
-- The organisation's loops by name, each with its newest run.
SELECT sqlc.embed(l), coalesce(r.number, 0)::int AS last_number, coalesce(r.status, '')::text AS last_status,
       coalesce(r.id, '00000000-0000-0000-0000-000000000000')::uuid AS last_run_id,
       coalesce(r.created_at, 'epoch')::timestamptz AS last_run_at
FROM loop_policies l
LEFT JOIN LATERAL (SELECT * FROM loop_runs x WHERE x.loop_id = l.id ORDER BY x.number DESC LIMIT 1) r ON true
WHERE l.org_id = @org_id
ORDER BY l.name;

-- name: LoopListActive :many
-- Every active loop with what its trigger reads: when its last collect
-- counted, when its last run started, and whether a run is under way.
SELECT l.*,
       -- 'epoch' stands for never.
       coalesce((SELECT max(r.collected_at) FROM loop_runs r WHERE r.loop_id = l.id), 'epoch')::timestamptz AS last_collected_at,
       coalesce((SELECT max(r.created_at) FROM loop_runs r WHERE r.loop_id = l.id), 'epoch')::timestamptz AS last_run_at,
       EXISTS (SELECT 1 FROM loop_runs r WHERE r.loop_id = l.id AND r.status IN ('running', 'waiting_approval')) AS busy
FROM loop_policies l
WHERE l.status = 'active'
ORDER BY l.created_at;

-- name: LoopCountNew :one
-- The items a loop's filter matches that were created or reviewed since
-- its last collect (all of them before a first one), with how many may be
-- training data, and why the others may not (an item may have several
-- reasons). With agreed_only, items whose overlapping review is open or
-- disputed are not yet eligible either.
SELECT count(*) AS matched,
       count(*) FILTER (WHERE f.is_training_data AND (NOT @agreed_only::bool OR review_settled(f.id))) AS eligible,
       count(*) FILTER (WHERE f.is_training_data AND @agreed_only::bool AND NOT review_settled(f.id)) AS unsettled,
       count(*) FILTER (WHERE NOT f.is_training_data AND f.hygiene_flags @> ARRAY['rate_outlier']) AS rate_outlier,
       count(*) FILTER (WHERE NOT f.is_training_data AND f.hygiene_flags @> ARRAY['duplicate_spam']) AS duplicate_spam,
       count(*) FILTER (WHERE NOT f.is_training_data AND f.hygiene_flags @> ARRAY['near_duplicate_spam']) AS near_duplicate_spam,
       count(*) FILTER (WHERE NOT f.is_training_data AND f.hygiene_flags @> ARRAY['bot_session']) AS bot_session,
       count(*) FILTER (WHERE NOT f.is_training_data AND f.training_set_by <> '') AS by_person
FROM feedback f
WHERE feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
    @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
    sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
  AND (sqlc.narg('since')::timestamptz IS NULL OR f.created_at > sqlc.narg('since') OR f.reviewed_at > sqlc.narg('since'));

-- name: LoopRunInsert :one
-- The caller holds the loop's row locked: runs are numbered one at a time.
INSERT INTO loop_runs (org_id, loop_id, number, started_by, started_by_label, spec, step)
VALUES (@org_id, @loop_id, (SELECT coalesce(max(number), 0) + 1 FROM loop_runs WHERE loop_id = @loop_id),
        @started_by, @started_by_label, @spec, @step)
RETURNING *;

-- name: LoopStepInsert :exec
INSERT INTO loop_run_steps (run_id, org_id, position, name) VALUES (@run_id, @org_id, @position, @name);

-- name: LoopRunGet :one
SELECT * FROM loop_runs WHERE org_id = @org_id AND id = @id;

-- name: LoopRunGetByID :one
-- For the step jobs, which carry no organisation.
SELECT * FROM loop_runs WHERE id = @id;

-- name: LoopRunGetForUpdate :one
SELECT * FROM loop_runs WHERE id = @id FOR UPDATE;

-- name: LoopRunList :many
-- A loop's runs, newest first, keyset-paginated.
SELECT * FROM loop_runs
WHERE org_id = @org_id AND loop_id = @loop_id
  AND (sqlc.narg('cursor_time')::timestamptz IS NULL OR (created_at, id) < (sqlc.narg('cursor_time'), sqlc.narg('cursor_id')::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;

-- name: LoopRunGetPreviousCollected :one
-- When the loop's newest earlier run collected.
SELECT collected_at::timestamptz FROM loop_runs
WHERE loop_id = @loop_id AND id <> @run_id AND collected_at IS NOT NULL
ORDER BY collected_at DESC LIMIT 1;

-- name: LoopRunUpdateStep :exec
UPDATE loop_runs SET step = @step WHERE id = @id;

-- name: LoopRunUpdateCollected :exec
UPDATE loop_runs SET collected_at = @collected_at WHERE id = @id;

-- name: LoopRunUpdateContent :exec
UPDATE loop_runs SET content_hash = @content_hash, dataset_version_id = @dataset_version_id WHERE id = @id;

-- name: LoopRunUpdateModelVersion :exec
UPDATE loop_runs SET model_version_id = @model_version_id WHERE id = @id;

-- name: LoopRunUpdateWaiting :exec
UPDATE loop_runs SET status = 'waiting_approval', waiting_for = @waiting_for WHERE id = @id AND status = 'running';

-- name: LoopRunUpdateApproved :execrows
UPDATE loop_runs SET status = 'running', approved_by_label = @approved_by_label, approved_at = now()
WHERE org_id = @org_id AND id = @id AND status = 'waiting_approval';

-- name: LoopRunUpdateFinished :execrows
-- A run ends once: a stop and a step ending at once end it one way.
UPDATE loop_runs SET status = @status, reason = @reason, finished_at = now()
WHERE id = @id AND status IN ('running', 'waiting_approval');

-- name: LoopRunUpdateCost :exec
UPDATE loop_runs SET cost_micros = cost_micros + @cost_micros WHERE id = @id;

-- name: LoopStepList :many
SELECT * FROM loop_run_steps WHERE run_id = @run_id ORDER BY position;

-- name: LoopStepListByRuns :many
SELECT * FROM loop_run_steps WHERE run_id = ANY(@run_ids::uuid[]) ORDER BY run_id, position;

-- name: LoopStepGet :one
SELECT * FROM loop_run_steps WHERE run_id = @run_id AND name = @name;

-- name: LoopStepUpdateStarted :exec
UPDATE loop_run_steps SET status = 'running', started_at = coalesce(started_at, now())
WHERE run_id = @run_id AND name = @name AND status IN ('pending', 'running', 'waiting');

-- name: LoopStepUpdate :exec
-- What a step did so far, or how it ended (finished).
UPDATE loop_run_steps SET status = @status, detail = @detail, links = @links, outcome = @outcome, cost_micros = @cost_micros,
    started_at = coalesce(started_at, now()),
    finished_at = CASE WHEN @finished::bool THEN now() ELSE NULL END
WHERE run_id = @run_id AND name = @name;

-- name: LoopStepUpdateRemaining :exec
-- The steps a run did not reach when it ended.
UPDATE loop_run_steps SET status = @status WHERE run_id = @run_id AND status = 'pending';

-- name: LoopStepGetByLink :one
-- The run whose step made (or used) an artefact: link is {"kind": "id"}.
SELECT r.id AS run_id, r.number, r.status, l.id AS loop_id, l.name AS loop_name, s.name AS step
FROM loop_run_steps s
JOIN loop_runs r ON r.id = s.run_id
JOIN loop_policies l ON l.id = r.loop_id
WHERE s.org_id = @org_id AND s.links @> @link::jsonb
ORDER BY r.created_at DESC, s.position
LIMIT 1;

-- name: LoopDatasetGetByName :one
-- The dataset a loop appends to: the newest of the name not archived.
SELECT id, dataset_type::text AS dataset_type FROM training_datasets
WHERE org_id = @org_id AND name = @name AND status <> 'archived'
ORDER BY created_at DESC LIMIT 1;

-- name: LoopPairListIDs :many
-- The pairs a loop's dataset takes: made by one of its methods, at least
-- as strong as it asks, with its tag when it names one, built only from
-- feedback that may be training data and, when filtered, from feedback
-- the recipe's queue filter matches (both items of a pair; a pair made by
-- hand, from no feedback, is then left out).
SELECT p.id FROM preference_pairs p
WHERE p.org_id = @org_id AND p.method::text = ANY(@methods::text[])
  AND p.preference_strength >= @min_strength::real
  AND (@pair_tag::text = '' OR p.tags @> ARRAY[@pair_tag::text])
  AND NOT EXISTS (SELECT 1 FROM feedback f WHERE f.id IN (p.chosen_feedback_id, p.rejected_feedback_id)
                  AND (NOT f.is_training_data OR f.status = 'rejected'))
  AND (NOT @filtered::bool OR (p.chosen_feedback_id IS NOT NULL AND NOT EXISTS (
      SELECT 1 FROM feedback f WHERE f.id IN (p.chosen_feedback_id, p.rejected_feedback_id)
        AND NOT feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type,
            sqlc.narg('source')::feedback_source, @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text,
            sqlc.narg('assignee_id')::uuid, sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz,
            true, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid, @safety_only::bool))))
ORDER BY p.created_at, p.id
LIMIT @row_limit;

-- name: LoopMemberListExcluded :many
-- The dataset's members that may no longer be training data.
SELECT m.feedback_id::uuid AS id FROM training_dataset_members m JOIN feedback f ON f.id = m.feedback_id
WHERE m.dataset_id = @dataset_id AND NOT f.is_training_data
UNION ALL
SELECT m.pair_id::uuid FROM training_dataset_members m JOIN preference_pairs p ON p.id = m.pair_id
WHERE m.dataset_id = @dataset_id
  AND EXISTS (SELECT 1 FROM feedback f WHERE f.id IN (p.chosen_feedback_id, p.rejected_feedback_id) AND NOT f.is_training_data);

-- name: LoopFineTuneJobGetByContent :one
-- A job that trains, or trained, content with this hash the same way:
-- the newest not failed or cancelled.
SELECT j.id, j.status::text AS status, j.created_at, j.name, j.dataset_version_id
FROM fine_tuning_jobs j JOIN dataset_versions v ON v.id = j.dataset_version_id
WHERE j.org_id = @org_id AND v.content_hash = @content_hash AND j.provider = @provider AND j.method = @method
  AND j.base_model = @base_model AND j.status NOT IN ('failed', 'cancelled')
ORDER BY j.created_at DESC LIMIT 1;

-- name: LoopEvaluationRunGetSince :one
-- A quality run of the version on the set started since a time (by this
-- step, before its worker stopped): the step adopts it.
SELECT id FROM evaluation_runs
WHERE org_id = @org_id AND candidate_version_id = @candidate_version_id AND golden_set_version_id = @golden_set_version_id
  AND kind = 'quality' AND status <> 'failed' AND created_at >= @since
ORDER BY created_at DESC LIMIT 1;

-- name: LoopAliasVersionGet :one
-- The version an alias of a registered model names.
SELECT a.version_id FROM model_aliases a JOIN registered_models m ON m.id = a.registered_model_id
WHERE m.org_id = @org_id AND m.name = @model AND a.alias = @alias;

-- name: LoopListApprovers :many
-- Who may approve a waiting run: the organisation's active admins.
SELECT email FROM users WHERE org_id = @org_id AND active AND role = 'admin' ORDER BY email;
