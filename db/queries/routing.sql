-- Routing (internal/routing): teams, and rules that assign new items to
-- curators.

-- name: TeamInsert :one
INSERT INTO teams (org_id, name) VALUES (@org_id, @name) RETURNING *;

-- name: TeamGet :one
SELECT * FROM teams WHERE org_id = @org_id AND id = @id;

-- name: TeamList :many
SELECT * FROM teams WHERE org_id = @org_id ORDER BY teams.name;

-- name: TeamMemberInsert :exec
INSERT INTO team_members (team_id, org_id, user_id, tags) VALUES (@team_id, @org_id, @user_id, @tags);

-- name: TeamMemberList :many
-- Every team's members with their e-mail, by team and e-mail.
SELECT m.team_id, m.user_id, m.tags, u.email
FROM team_members m JOIN users u ON u.id = m.user_id
WHERE m.org_id = @org_id
ORDER BY m.team_id, u.email;

-- name: RoutingRuleInsert :one
INSERT INTO routing_rules (org_id, name, filter, mode, team_id, cap, position, created_by_label)
VALUES (@org_id, @name, @filter, @mode, sqlc.narg('team_id'), @cap,
        (SELECT coalesce(max(position), 0) + 1 FROM routing_rules WHERE org_id = @org_id), @created_by_label)
RETURNING *;

-- name: RoutingRuleCuratorInsert :exec
INSERT INTO routing_rule_curators (rule_id, org_id, user_id, tags, position)
VALUES (@rule_id, @org_id, @user_id, @tags, @position);

-- name: RoutingRuleList :many
SELECT r.*, coalesce(t.name, '')::text AS team_name
FROM routing_rules r LEFT JOIN teams t ON t.id = r.team_id
WHERE r.org_id = @org_id
ORDER BY r.position, r.created_at;

-- name: RoutingRuleListActive :many
SELECT * FROM routing_rules WHERE org_id = @org_id AND active ORDER BY position, created_at;

-- name: RoutingRuleGet :one
SELECT * FROM routing_rules WHERE org_id = @org_id AND id = @id;

-- name: RoutingRuleUpdateActive :one
UPDATE routing_rules SET active = @active WHERE org_id = @org_id AND id = @id RETURNING *;

-- name: RoutingRuleListCurators :many
-- Whom a rule hands work to, in turn order: its own curators, or its
-- team's members by e-mail. Only active users who may review.
SELECT x.user_id, x.tags, u.email
FROM (
    SELECT c.user_id, c.tags, c.position::bigint AS position FROM routing_rule_curators c WHERE c.rule_id = @rule_id
    UNION ALL
    SELECT m.user_id, m.tags, 0::bigint FROM routing_rules r JOIN team_members m ON m.team_id = r.team_id
    WHERE r.id = @rule_id
) x
JOIN users u ON u.id = x.user_id AND u.org_id = @org_id AND u.active AND u.role IN ('curator', 'admin')
ORDER BY x.position, u.email;

-- name: RoutingListCandidates :many
-- Items a rule may route: pending, unassigned, arrived since the rule was
-- made, and matching its filter; oldest first.
SELECT f.id, f.tags
FROM feedback f
WHERE feedback_matches(f, @org_id::uuid, sqlc.narg('status')::review_status, sqlc.narg('feedback_type')::feedback_type, sqlc.narg('source')::feedback_source,
    @rating_min::int, @rating_max::int, @dim_below::int, @tag::text, @model::text, sqlc.narg('assignee_id')::uuid,
    sqlc.narg('created_from')::timestamptz, sqlc.narg('created_to')::timestamptz, @with_duplicates::bool, @pii_only::bool, @q::text, sqlc.narg('dataset_id')::uuid,
    @safety_only::bool)
  AND f.assignee_id IS NULL AND f.status = 'pending' AND f.created_at >= @since
ORDER BY f.created_at, f.id
LIMIT @row_limit;

-- name: RoutingCuratorGetLock :exec
-- Serialises the assignments of one curator, whichever rule or process
-- makes them, until the transaction ends: the count of their open items
-- and the assignment that follows it cannot interleave with another's.
SELECT pg_advisory_xact_lock(hashtextextended('curate.routing:' || CAST(@user_id::uuid AS text), 0));

-- name: RoutingCountOpen :one
-- Items assigned to a curator still to review.
SELECT count(*) FROM feedback
WHERE org_id = @org_id AND assignee_id = @user_id AND status IN ('pending', 'needs_correction');

-- name: RoutingFeedbackUpdateAssignee :execrows
UPDATE feedback SET assignee_id = @user_id, updated_at = now(), version = version + 1
WHERE org_id = @org_id AND id = @id AND assignee_id IS NULL AND status = 'pending';

-- name: RoutingRuleUpdateRouted :exec
UPDATE routing_rules SET routed = routed + 1, last_user_id = @user_id WHERE id = @id;

-- name: RoutingListOrgIDs :many
-- The organisations with an active rule.
SELECT DISTINCT org_id FROM routing_rules WHERE active;

-- name: RoutingListEligibleUsers :many
-- The users a rule or a team may name: active curators and admins.
SELECT id, email, role::text AS role FROM users
WHERE org_id = @org_id AND active AND role IN ('curator', 'admin')
ORDER BY email;
