-- Training datasets: the datasets themselves, their members, frozen
-- versions with their items, and exports.

-- name: DatasetInsert :one
INSERT INTO training_datasets (
    org_id, name, description, dataset_type, system_prompt, export_format, base_model,
    split_strategy, validation_percent, split_seed, created_by, curator_label, agreed_only
) VALUES (
    @org_id, @name, @description, @dataset_type, @system_prompt, @export_format, @base_model,
    @split_strategy, @validation_percent, @split_seed, sqlc.narg('created_by'), @curator_label, @agreed_only
)
RETURNING *;

-- name: DatasetGet :one
SELECT sqlc.embed(d),
    (SELECT count(*) FROM training_dataset_members m WHERE m.dataset_id = d.id)::bigint AS member_count
FROM training_datasets d
WHERE d.org_id = @org_id AND d.id = @id;

-- name: DatasetGetForUpdate :one
-- Locks the dataset for a change of status or membership.
SELECT * FROM training_datasets WHERE org_id = @org_id AND id = @id FOR UPDATE;

-- name: DatasetList :many
SELECT sqlc.embed(d),
    (SELECT count(*) FROM training_dataset_members m WHERE m.dataset_id = d.id)::bigint AS member_count,
    coalesce(v.number, 0)::int AS version_number, coalesce(v.item_count, 0)::int AS version_items
FROM training_datasets d
LEFT JOIN dataset_versions v ON v.id = d.current_version_id
WHERE d.org_id = @org_id
  AND (sqlc.narg('status')::dataset_status IS NULL OR d.status = sqlc.narg('status'))
  AND (sqlc.narg('dataset_type')::dataset_type IS NULL OR d.dataset_type = sqlc.narg('dataset_type'))
  AND (@include_archived::bool OR sqlc.narg('status')::dataset_status = 'archived' OR d.status <> 'archived')
  AND (sqlc.narg('cursor_time')::timestamptz IS NULL OR (d.created_at, d.id) < (sqlc.narg('cursor_time'), sqlc.narg('cursor_id')::uuid))
ORDER BY d.created_at DESC, d.id DESC
LIMIT @row_limit;

-- name: DatasetUpdate :one
-- Optimistic locking: the write happens only if the version still matches.
UPDATE training_datasets SET
    name = @name, description = @description, system_prompt = @system_prompt, export_format = @export_format,
    base_model = @base_model, split_strategy = @split_strategy, validation_percent = @validation_percent,
    split_seed = @split_seed, agreed_only = @agreed_only, updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id AND version = @version
RETURNING *;

-- name: DatasetUpdateStatus :one
UPDATE training_datasets SET status = @status, updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id
RETURNING *;

-- name: DatasetUpdateCurrentVersion :one
UPDATE training_datasets SET status = 'ready', current_version_id = @version_id, quality_score = sqlc.narg('quality_score'),
    updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id
RETURNING *;

-- name: DatasetUpdateSavedFilter :exec
UPDATE training_datasets SET saved_filter = @saved_filter, updated_at = now() WHERE org_id = @org_id AND id = @id;

-- name: DatasetUpdateExported :exec
-- A finished export moves a ready dataset on; other states stay as they are.
UPDATE training_datasets SET status = 'exported', updated_at = now(), version = version + 1
WHERE id = @id AND status = 'ready';

-- name: DatasetMemberInsertPairs :execrows
INSERT INTO training_dataset_members (dataset_id, org_id, pair_id)
SELECT @dataset_id, @org_id, p.id FROM preference_pairs p
WHERE p.org_id = @org_id AND p.id = ANY(@ids::uuid[])
ON CONFLICT DO NOTHING;

-- name: DatasetMemberInsertFeedback :execrows
-- Only approved and corrected feedback that may be training data (see
-- internal/hygiene) is training material.
INSERT INTO training_dataset_members (dataset_id, org_id, feedback_id)
SELECT @dataset_id, @org_id, f.id FROM feedback f
WHERE f.org_id = @org_id AND f.id = ANY(@ids::uuid[]) AND f.status IN ('approved', 'corrected') AND f.is_training_data
ON CONFLICT DO NOTHING;

-- name: DatasetMemberDelete :execrows
DELETE FROM training_dataset_members
WHERE dataset_id = @dataset_id AND (pair_id = ANY(@ids::uuid[]) OR feedback_id = ANY(@ids::uuid[]));

-- name: DatasetListMissingPairs :many
-- The ids that name no pair of the organisation.
SELECT x.id::uuid AS id FROM unnest(@ids::uuid[]) AS x(id)
WHERE NOT EXISTS (SELECT 1 FROM preference_pairs p WHERE p.org_id = @org_id AND p.id = x.id);

-- name: DatasetListIneligibleFeedback :many
-- The ids that name no approved or corrected feedback of the organisation
-- that may be training data, with the status they have ('' when there is
-- no such item) and the hygiene flags or person that keep the others out.
SELECT x.id::uuid AS id, coalesce(f.status::text, '')::text AS status,
       coalesce(f.hygiene_flags, '{}')::text[] AS hygiene_flags, coalesce(f.training_set_by, '')::text AS training_set_by
FROM unnest(@ids::uuid[]) AS x(id)
LEFT JOIN feedback f ON f.org_id = @org_id AND f.id = x.id
WHERE f.id IS NULL OR f.status NOT IN ('approved', 'corrected') OR NOT f.is_training_data;

-- name: DatasetListPairIDsByFilter :many
SELECT p.id FROM preference_pairs p
WHERE p.org_id = @org_id
  AND (sqlc.narg('method')::pair_method IS NULL OR p.method = sqlc.narg('method'))
  AND (@tag::text = '' OR p.tags @> ARRAY[@tag::text])
  AND (@min_strength::real = 0 OR p.preference_strength >= @min_strength)
  AND (sqlc.narg('created_from')::timestamptz IS NULL OR p.created_at >= sqlc.narg('created_from'))
  AND (sqlc.narg('created_to')::timestamptz IS NULL OR p.created_at < sqlc.narg('created_to'))
  AND (@q::text = '' OR p.query ILIKE '%' || @q || '%')
ORDER BY p.created_at DESC, p.id DESC
LIMIT @row_limit;

-- name: DatasetMemberList :many
-- A page of members for the detail page, newest first.
SELECT coalesce(p.id, f.id)::uuid AS id,
    CASE WHEN m.pair_id IS NOT NULL THEN 'pair' ELSE 'feedback' END::text AS source,
    left(coalesce(p.query, f.query), 200)::text AS query,
    left(coalesce(p.chosen_response, CASE WHEN f.correction <> '' THEN f.correction ELSE f.response END), 200)::text AS reply,
    coalesce(f.status::text, p.method::text, '')::text AS detail,
    m.added_at
FROM training_dataset_members m
LEFT JOIN preference_pairs p ON p.id = m.pair_id
LEFT JOIN feedback f ON f.id = m.feedback_id
WHERE m.dataset_id = @dataset_id
ORDER BY m.added_at DESC, coalesce(p.id, f.id) DESC
LIMIT @row_limit;

-- name: DatasetMemberListSplitKeys :many
-- What the split needs of every member: its stratum (a pair's method, or
-- feedback's rating or type), end user (a pair's chosen answer's) and time.
-- Small per row, so a whole dataset fits in memory. Each kind of member is
-- read by a branch of its own: with both kinds left-joined in one query,
-- each member's pair was looked up by its key in turn whatever the
-- dataset's size (9.6 s at a million pairs, against 1.7 s for the pairs'
-- branch as a hash join).
SELECT p.id, ('method:' || p.method::text)::text AS stratum,
    coalesce(cf.end_user_id, '')::text AS end_user, p.created_at
FROM training_dataset_members m
JOIN preference_pairs p ON p.id = m.pair_id
LEFT JOIN feedback cf ON cf.id = p.chosen_feedback_id
WHERE m.dataset_id = @dataset_id
UNION ALL
SELECT f.id,
    CASE WHEN f.rating IS NOT NULL THEN 'rating:' || f.rating::text
         ELSE 'type:' || f.feedback_type::text END::text,
    f.end_user_id, f.created_at
FROM training_dataset_members m
JOIN feedback f ON f.id = m.feedback_id
WHERE m.dataset_id = @dataset_id;

-- name: DatasetMemberListPairContents :many
-- One keyset page of the pairs' exported fields, by id, for reports that
-- number the members in that order. The page of members is cut first and
-- then joined, so each page costs its own rows: joined whole, the planner
-- merged from the first pair on every page (a read quadratic in the
-- members) or went parallel.
-- JSON comes as text: the caller decodes it once, with the fast decoder
-- (decodeExample), instead of pgx validating and copying it first.
SELECT p.id, p.prompt::text AS prompt, p.system_prompt, p.chosen_response, p.rejected_response
FROM (SELECT pair_id FROM training_dataset_members
      WHERE dataset_id = @dataset_id AND pair_id > @after::uuid
      ORDER BY pair_id LIMIT @row_limit) m
JOIN preference_pairs p ON p.id = m.pair_id
ORDER BY m.pair_id;

-- name: DatasetMemberListPairContentsAll :many
-- Every pair member's exported fields as DatasetMemberListPairContents
-- gives them, in no order: a freeze streams them
-- (DatasetMemberEachPairContent), never loading them. One join over the
-- whole dataset lets Postgres hash the members and read the pairs in heap
-- order, where pages by id looked each pair up by its key at random:
-- 2.3 s against 5.8 s at a million pairs.
SELECT p.id, p.prompt::text AS prompt, p.system_prompt, p.chosen_response, p.rejected_response
FROM training_dataset_members m
JOIN preference_pairs p ON p.id = m.pair_id
WHERE m.dataset_id = @dataset_id;

-- name: DatasetMemberListFeedbackContents :many
-- One keyset page of the feedback's exported fields, by id, cut before the
-- join as the pairs' page is.
SELECT f.id, f.query, f.response, f.correction, f.status, f.context::text AS context
FROM (SELECT feedback_id FROM training_dataset_members
      WHERE dataset_id = @dataset_id AND feedback_id > @after::uuid
      ORDER BY feedback_id LIMIT @row_limit) m
JOIN feedback f ON f.id = m.feedback_id
ORDER BY m.feedback_id;

-- name: DatasetVersionInsert :one
INSERT INTO dataset_versions (
    id, org_id, dataset_id, number, kind, content_hash, item_count, train_count, validation_count,
    split_strategy, validation_percent, split_seed, created_by_label, left_out_disputed, left_out_open
) VALUES (
    @id, @org_id, @dataset_id,
    (SELECT coalesce(max(number), 0) + 1 FROM dataset_versions WHERE dataset_id = @dataset_id),
    @kind, @content_hash, @item_count, @train_count, @validation_count,
    @split_strategy, @validation_percent, @split_seed, @created_by_label, @left_out_disputed, @left_out_open
)
RETURNING *;

-- name: DatasetVersionItemStageInsertTable :exec
-- Where a freeze writes its items as it reads them, in the members' order:
-- a table without an index, WAL or other sessions, gone at commit. Writing
-- them into dataset_version_items in that order instead inserted into the
-- primary key at random places (content_sha is a hash), the most of a
-- freeze's time at a million items; DatasetVersionItemInsertStaged then
-- writes them all in the key's order, appending to the index.
CREATE TEMP TABLE dataset_version_item_stage (
    content_sha bytea NOT NULL,
    source_id   uuid NOT NULL,
    split       text NOT NULL,
    content     jsonb NOT NULL
) ON COMMIT DROP;

-- name: DatasetVersionItemStageInsertMany :copyfrom
-- The column list of DatasetVersionItemStageCopy, which streams the rows.
INSERT INTO dataset_version_item_stage (content_sha, source_id, split, content) VALUES ($1, $2, $3, $4);

-- name: DatasetVersionItemInsertStaged :execrows
-- A freeze's staged items into the version, sorted by the primary key.
INSERT INTO dataset_version_items (version_id, content_sha, source_id, split, content)
SELECT @version_id::uuid, content_sha, source_id, split, content FROM dataset_version_item_stage
ORDER BY split, content_sha, source_id;

-- name: DatasetVersionGetLatest :one
SELECT * FROM dataset_versions WHERE dataset_id = @dataset_id ORDER BY number DESC LIMIT 1;

-- name: DatasetVersionGet :one
SELECT * FROM dataset_versions WHERE org_id = @org_id AND id = @id;

-- name: DatasetVersionList :many
SELECT * FROM dataset_versions WHERE org_id = @org_id AND dataset_id = @dataset_id ORDER BY number DESC;

-- name: DatasetVersionItemListSplit :many
-- One split of a version's contents in canonical order, whole: exports and
-- reports stream it row by row (DatasetVersionItemEach), never loading it.
SELECT content::text AS content FROM dataset_version_items
WHERE version_id = @version_id AND split = @split
ORDER BY content_sha, source_id;

-- name: ExportInsert :one
INSERT INTO dataset_exports (org_id, dataset_id, version_id, format, mask_pii, rows_total, created_by_label)
VALUES (@org_id, @dataset_id, @version_id, @format, @mask_pii, @rows_total, @created_by_label)
RETURNING *;

-- name: DatasetUpdateQuality :exec
-- The quality score of an export's validation report, kept only when the
-- export is of the current version in the target format.
UPDATE training_datasets SET quality_score = @quality_score
WHERE org_id = @org_id AND id = @id AND current_version_id = @version_id AND export_format = @export_format;

-- name: ExportGet :one
SELECT * FROM dataset_exports WHERE org_id = @org_id AND id = @id;

-- name: ExportGetByID :one
-- For the worker, which acts on the export named by its job.
SELECT * FROM dataset_exports WHERE id = @id;

-- name: ExportList :many
SELECT * FROM dataset_exports WHERE org_id = @org_id AND dataset_id = @dataset_id ORDER BY created_at DESC, id DESC LIMIT 50;

-- name: ExportUpdateStarted :exec
UPDATE dataset_exports SET status = 'running', rows_done = 0, error = '' WHERE id = @id;

-- name: ExportUpdateProgress :exec
UPDATE dataset_exports SET rows_done = @rows_done WHERE id = @id;

-- name: ExportUpdateFinished :exec
UPDATE dataset_exports SET status = 'succeeded', rows_done = rows_total, storage_prefix = @storage_prefix,
    manifest = @manifest, finished_at = now()
WHERE id = @id;

-- name: ExportUpdateFailed :exec
UPDATE dataset_exports SET status = 'failed', error = @error, finished_at = now() WHERE id = @id;

-- name: DatasetGetOrgID :one
-- The organisation of a dataset, for the command line, which names
-- datasets by id alone.
SELECT org_id FROM training_datasets WHERE id = @id;

-- name: DatasetVersionListForOrg :many
-- Frozen versions a fine-tuning launch may choose from, newest first.
SELECT v.id, v.kind, v.number, v.item_count, v.train_count, v.validation_count, v.content_hash, d.name AS dataset_name
FROM dataset_versions v JOIN training_datasets d ON d.id = v.dataset_id
WHERE v.org_id = @org_id AND d.status <> 'archived'
ORDER BY v.created_at DESC
LIMIT 200;

-- name: DatasetVersionListByIDs :many
-- The current versions of a page of datasets, for list answers that show
-- each dataset as GET /:id does.
SELECT * FROM dataset_versions WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- name: ExportListLatestSucceeded :many
-- The newest finished export of each of a page of datasets: their
-- export_url in list answers.
SELECT DISTINCT ON (dataset_id) * FROM dataset_exports
WHERE org_id = @org_id AND dataset_id = ANY(@dataset_ids::uuid[]) AND status = 'succeeded'
ORDER BY dataset_id, created_at DESC, id DESC;

-- name: DatasetListOpen :many
-- Datasets that can take new members without a new freeze (draft or
-- curating) and hold the given types, by name: the choices of "Add to
-- dataset…" on the pairs list and the feedback queue.
SELECT d.id, d.name, d.dataset_type, d.status
FROM training_datasets d
WHERE d.org_id = @org_id AND d.status IN ('draft', 'curating') AND d.dataset_type::text = ANY(@types::text[])
ORDER BY lower(d.name), d.id
LIMIT 500;

-- name: DatasetVersionListJobs :many
-- The fine-tuning jobs trained on the dataset's frozen versions, newest
-- first, for the versions table.
SELECT j.id, j.dataset_version_id, j.status::text AS status, j.provider, j.base_model, j.suffix, j.created_at
FROM fine_tuning_jobs j
JOIN dataset_versions v ON v.id = j.dataset_version_id AND v.org_id = j.org_id
WHERE j.org_id = @org_id AND v.dataset_id = @dataset_id
ORDER BY j.created_at DESC, j.id DESC;

-- name: DatasetVersionReportGet :one
SELECT report FROM dataset_version_reports
WHERE version_id = @version_id AND format = @format AND mask_pii = @mask_pii AND base_model = @base_model AND validator = @validator;

-- name: DatasetVersionReportInsert :exec
INSERT INTO dataset_version_reports (version_id, format, mask_pii, base_model, validator, report)
VALUES (@version_id, @format, @mask_pii, @base_model, @validator, @report)
ON CONFLICT DO NOTHING;

-- name: DatasetVersionGetByID :one
-- For the worker, which knows the version only by its id.
SELECT * FROM dataset_versions WHERE id = @id;

-- name: DatasetVersionItemListFacts :many
-- A keyset range of one split of a version in canonical order with each
-- item's stored facts in a profile; the content comes only where there
-- are none. Reports stream it a large range at a time
-- (DatasetVersionItemEachFacts), planned for each range's own values.
SELECT i.content_sha, i.source_id, f.facts, CASE WHEN f.facts IS NULL THEN i.content::text END AS content
FROM dataset_version_items i
LEFT JOIN item_facts f ON f.org_id = @org_id AND f.profile = @profile AND f.content_sha = i.content_sha
WHERE i.version_id = @version_id AND i.split = @split
  AND (i.content_sha, i.source_id) > (@after_sha::bytea, @after_source::uuid)
ORDER BY i.content_sha, i.source_id
LIMIT @row_limit;

-- name: ItemFactsList :many
SELECT content_sha, facts FROM item_facts
WHERE org_id = @org_id AND profile = @profile AND content_sha = ANY(@content_shas::bytea[]);

-- name: ItemFactsInsertMany :exec
-- Two reports may compute the same facts at once: the first kept wins.
INSERT INTO item_facts (org_id, profile, content_sha, facts)
SELECT @org_id, @profile, unnest(@content_shas::bytea[]), unnest(@facts::bytea[])
ON CONFLICT DO NOTHING;

-- name: ItemFactsDeleteExpired :execrows
-- A bounded batch of facts created before a time: the caller repeats
-- until none is left, so no one statement holds locks for long.
DELETE FROM item_facts f WHERE f.ctid = ANY(ARRAY(
    SELECT e.ctid FROM item_facts e WHERE e.created_at < @before LIMIT 10000));

-- name: DatasetVersionItemCountRubricAnswered :one
-- Whether any item of a version carries rubric answers (1) or none does
-- (0): a Parquet export then has a rubric_answers column.
SELECT count(*)::int FROM (
    SELECT 1 FROM dataset_version_items WHERE version_id = @version_id AND content ? 'rubric_answers' LIMIT 1
) x;
