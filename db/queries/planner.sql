-- The planner's settings for one transaction.

-- name: PlannerUpdateIndexOnly :exec
-- For the rest of the transaction, the planner reads by index wherever an
-- index serves (as feedback_first_id is planned, migration 00105). The
-- periodic jobs' statements (hygiene's rules, the alerts' windows) read a
-- bounded part of feedback by their indexes; on misestimates over CTEs,
-- or a window covering much of a month's partition, whole partitions
-- looked cheaper and an idle server read feedback sequentially.
SELECT set_config('enable_seqscan', 'off', true);
