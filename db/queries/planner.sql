-- The planner's settings for one transaction.

-- name: PlannerUpdateIndexOnly :exec
-- For the rest of the transaction, the planner reads by index wherever an
-- index serves (as feedback_first_id is planned, migration 00105). The
-- periodic jobs' statements (hygiene's rules, the alerts' windows) read a
-- bounded part of feedback by their indexes; on misestimates over CTEs,
-- or a window covering much of a month's partition, whole partitions
-- looked cheaper and an idle server read feedback sequentially.
SELECT set_config('enable_seqscan', 'off', true);

-- name: PlannerUpdateBulkRead :exec
-- For the rest of the transaction, a statement that reads a whole dataset
-- at once may hash its keys in memory (a million members' ids take 55 MB;
-- in the default 4 MB the join wrote them to disk in 64 batches) and
-- runs without parallel workers: the reader shares the cores with the
-- program encoding what it reads and the backend storing it.
SELECT set_config('work_mem', '64MB', true), set_config('max_parallel_workers_per_gather', '0', true);
