// Package routing hands new feedback to curators: rules assign the pending,
// unassigned items a queue filter matches (thumbs-down, say) to curators
// they name or to a team's members, in turn or by the items' tags, never
// giving a curator more than the rule's cap of items still to review. The
// Overview's "My assignments" counts what they were given.
//
// The cap is checked and the item assigned in one transaction that holds
// a lock on the curator, so rules running at once in several processes
// never give a curator more than the cap between them.
package routing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
)

// Modes: in turn, or by tag (an item goes to a curator whose tags it
// carries, in turn among them).
const (
	RoundRobin = "round_robin"
	ByTag      = "by_tag"
)

// Modes lists the modes.
var Modes = []string{RoundRobin, ByTag}

// Limits on input.
const (
	MaxName     = 200
	MaxCurators = 200
	MaxCap      = 100000
	// batch is how many items one pass of a rule looks at.
	batch = 500
)

// RouteEvery is how often the rules run.
const RouteEvery = 30 * time.Second

// Service keeps rules and teams and runs the rules.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds the routing rules' service on pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// Curator is a curator a rule or a team names, with the tags they take
// under a rule that routes by tag.
type Curator struct {
	UserID uuid.UUID `json:"user_id"`
	Email  string    `json:"email"`
	Tags   []string  `json:"tags"`
}

// NewRule is what creating a rule takes: its curators, or a team.
type NewRule struct {
	Name     string
	Filter   url.Values // the queue's filter
	Mode     string
	TeamID   uuid.UUID
	Curators []Curator
	Cap      int
}

// Rule is a rule as pages show it.
type Rule struct {
	ID        uuid.UUID
	Name      string
	Filter    string // as query parameters
	Mode      string
	Team      string
	Curators  []Curator
	Cap       int
	Active    bool
	Routed    int64
	CreatedBy string
	CreatedAt time.Time
}

// Team is a named group of curators.
type Team struct {
	ID      uuid.UUID
	Name    string
	Members []Curator
}

// User is someone a rule or a team may name.
type User struct {
	ID    uuid.UUID
	Email string
	Role  string
}

// Users lists the organisation's active curators and admins.
func (s *Service) Users(ctx context.Context, orgID uuid.UUID) ([]User, error) {
	rows, err := db.New(s.Pool).RoutingListEligibleUsers(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]User, len(rows))
	for i, r := range rows {
		out[i] = User{ID: r.ID, Email: r.Email, Role: r.Role}
	}
	return out, nil
}

// checkCurators checks the named curators are the organisation's active
// curators or admins, each once, with usable tags.
func checkCurators(v *errs.Invalid, field string, cs []Curator, users []User) {
	if len(cs) > MaxCurators {
		v.Add(field, "at most %d curators", MaxCurators)
		return
	}
	seen := map[uuid.UUID]bool{}
	for i, c := range cs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !slices.ContainsFunc(users, func(u User) bool { return u.ID == c.UserID }) {
			v.Add(f, "is not an active curator or admin of this organisation")
		}
		if seen[c.UserID] {
			v.Add(f, "is named twice")
		}
		seen[c.UserID] = true
		tags, msg := feedback.NormalizeTags(c.Tags)
		if msg != "" {
			v.Add(f+".tags", "%s", msg)
		}
		cs[i].Tags = tags
	}
}

// CreateTeam makes a team of curators.
func (s *Service) CreateTeam(ctx context.Context, actor audit.Actor, orgID uuid.UUID, name string, members []Curator) (Team, error) {
	name = strings.TrimSpace(name)
	v := &errs.Invalid{}
	v.Text("name", name, MaxName, true)
	users, err := s.Users(ctx, orgID)
	if err != nil {
		return Team{}, err
	}
	if len(members) == 0 {
		v.Add("members", "choose at least one curator")
	}
	checkCurators(v, "members", members, users)
	if err := v.Err(); err != nil {
		return Team{}, err
	}
	var out Team
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		t, err := q.TeamInsert(ctx, db.TeamInsertParams{OrgID: orgID, Name: name})
		if errs.IsUnique(err, "teams_org_id_name_key") {
			return errs.InvalidField("name", "a team is already called %q", name)
		}
		if err != nil {
			return err
		}
		for _, m := range members {
			if err := q.TeamMemberInsert(ctx, db.TeamMemberInsertParams{TeamID: t.ID, OrgID: orgID, UserID: m.UserID, Tags: nonNil(m.Tags)}); err != nil {
				return err
			}
		}
		out = Team{ID: t.ID, Name: t.Name, Members: members}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "routing.team_create", TargetType: "team",
			TargetID: t.ID.String(), Details: map[string]any{"name": name, "members": len(members)}})
	})
	return out, err
}

// Teams lists the organisation's teams with their members.
func (s *Service) Teams(ctx context.Context, orgID uuid.UUID) ([]Team, error) {
	q := db.New(s.Pool)
	teams, err := q.TeamList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	members, err := q.TeamMemberList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Team, len(teams))
	for i, t := range teams {
		out[i] = Team{ID: t.ID, Name: t.Name}
		for _, m := range members {
			if m.TeamID == t.ID {
				out[i].Members = append(out[i].Members, Curator{UserID: m.UserID, Email: m.Email, Tags: m.Tags})
			}
		}
	}
	return out, nil
}

// CreateRule stores a rule, active at once; it routes items that arrive
// from now on.
func (s *Service) CreateRule(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewRule) (Rule, error) {
	in.Name = strings.TrimSpace(in.Name)
	v := &errs.Invalid{}
	v.Text("name", in.Name, MaxName, true)
	f, err := feedback.ParseFilter(in.Filter)
	if err != nil {
		var bad *errs.Invalid
		if errors.As(err, &bad) {
			for _, e := range bad.Errors {
				v.Add("filter."+e.Field, "%s", e.Message)
			}
		} else {
			return Rule{}, err
		}
	}
	if f.Status != "" && f.Status != "pending" {
		v.Add("filter.status", "a rule routes pending items: leave the status out or choose pending")
	}
	if f.Assignee != uuid.Nil {
		v.Add("filter.assignee", "a rule routes unassigned items: leave the assignee out")
	}
	if !slices.Contains(Modes, in.Mode) {
		v.Add("mode", "must be round_robin or by_tag")
	}
	if in.Cap < 1 || in.Cap > MaxCap {
		v.Add("cap", "must be a whole number from 1 to %d: the most items a curator holds still to review", MaxCap)
	}
	users, err := s.Users(ctx, orgID)
	if err != nil {
		return Rule{}, err
	}
	switch {
	case in.TeamID != uuid.Nil && len(in.Curators) > 0:
		v.Add("team_id", "name curators or a team, not both")
	case in.TeamID == uuid.Nil && len(in.Curators) == 0:
		v.Add("curators", "choose curators or a team to hand the items to")
	}
	checkCurators(v, "curators", in.Curators, users)
	if in.Mode == ByTag && in.TeamID == uuid.Nil && !slices.ContainsFunc(in.Curators, func(c Curator) bool { return len(c.Tags) > 0 }) {
		v.Add("curators", "routing by tag needs tags on the curators: the items each of them takes")
	}
	if err := v.Err(); err != nil {
		return Rule{}, err
	}
	var out Rule
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		p := db.RoutingRuleInsertParams{OrgID: orgID, Name: in.Name, Filter: f.Values().Encode(), Mode: in.Mode, Cap: int32(in.Cap),
			CreatedByLabel: actor.Label}
		team := ""
		if in.TeamID != uuid.Nil {
			t, err := q.TeamGet(ctx, db.TeamGetParams{OrgID: orgID, ID: in.TeamID})
			if errors.Is(err, pgx.ErrNoRows) {
				return errs.InvalidField("team_id", "no such team in this organisation")
			}
			if err != nil {
				return err
			}
			p.TeamID, team = uuid.NullUUID{UUID: t.ID, Valid: true}, t.Name
		}
		r, err := q.RoutingRuleInsert(ctx, p)
		if errs.IsUnique(err, "routing_rules_org_id_name_key") {
			return errs.InvalidField("name", "a rule is already called %q", in.Name)
		}
		if err != nil {
			return err
		}
		for i, c := range in.Curators {
			if err := q.RoutingRuleCuratorInsert(ctx, db.RoutingRuleCuratorInsertParams{RuleID: r.ID, OrgID: orgID, UserID: c.UserID,
				Tags: nonNil(c.Tags), Position: int32(i)}); err != nil {
				return err
			}
		}
		out = Rule{ID: r.ID, Name: r.Name, Filter: r.Filter, Mode: r.Mode, Team: team, Curators: in.Curators, Cap: int(r.Cap),
			Active: r.Active, CreatedBy: r.CreatedByLabel, CreatedAt: r.CreatedAt}
		filter := map[string]string{}
		for k, vs := range f.Values() {
			filter[k] = vs[0]
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "routing.rule_create", TargetType: "routing_rule",
			TargetID: r.ID.String(), Details: map[string]any{"name": r.Name, "filter": filter, "mode": r.Mode, "cap": r.Cap, "team": team,
				"curators": len(in.Curators)}})
	})
	return out, err
}

// Rules lists the organisation's rules in the order they run.
func (s *Service) Rules(ctx context.Context, orgID uuid.UUID) ([]Rule, error) {
	q := db.New(s.Pool)
	rows, err := q.RoutingRuleList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Rule, len(rows))
	for i, r := range rows {
		cs, err := q.RoutingRuleListCurators(ctx, db.RoutingRuleListCuratorsParams{RuleID: r.ID, OrgID: orgID})
		if err != nil {
			return nil, err
		}
		out[i] = Rule{ID: r.ID, Name: r.Name, Filter: r.Filter, Mode: r.Mode, Team: r.TeamName, Cap: int(r.Cap), Active: r.Active,
			Routed: r.Routed, CreatedBy: r.CreatedByLabel, CreatedAt: r.CreatedAt}
		for _, c := range cs {
			out[i].Curators = append(out[i].Curators, Curator{UserID: c.UserID, Email: c.Email, Tags: c.Tags})
		}
	}
	return out, nil
}

// SetActive turns a rule on or off.
func (s *Service) SetActive(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, active bool) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		r, err := q.RoutingRuleUpdateActive(ctx, db.RoutingRuleUpdateActiveParams{OrgID: orgID, ID: id, Active: active})
		if err != nil {
			return errs.NotFound(err)
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "routing.rule_active", TargetType: "routing_rule",
			TargetID: r.ID.String(), Details: map[string]any{"name": r.Name, "active": active}})
	})
}

// Result is what one routing pass did.
type Result struct {
	Assigned int
	// Waiting are items a rule matched that no curator could take: each
	// of them held the cap, or none takes the item's tags.
	Waiting int
}

// RouteAll runs every organisation's rules once.
func (s *Service) RouteAll(ctx context.Context) error {
	orgs, err := db.New(s.Pool).RoutingListOrgIDs(ctx)
	if err != nil {
		return err
	}
	var all []error
	for _, org := range orgs {
		if _, err := s.Route(ctx, org); err != nil {
			all = append(all, fmt.Errorf("organisation %s: %w", org, err))
		}
	}
	return errors.Join(all...)
}

// Route runs the organisation's active rules once, in order: each hands
// the items it matches to its curators until they hold its cap.
func (s *Service) Route(ctx context.Context, orgID uuid.UUID) (Result, error) {
	rules, err := db.New(s.Pool).RoutingRuleListActive(ctx, orgID)
	if err != nil {
		return Result{}, err
	}
	var res Result
	for _, r := range rules {
		n, waiting, err := s.routeRule(ctx, r)
		if err != nil {
			return res, fmt.Errorf("rule %q: %w", r.Name, err)
		}
		res.Assigned += n
		res.Waiting += waiting
	}
	return res, nil
}

func (s *Service) routeRule(ctx context.Context, r db.RoutingRule) (assigned, waiting int, err error) {
	q := db.New(s.Pool)
	values, err := url.ParseQuery(r.Filter)
	if err != nil {
		return 0, 0, err
	}
	f, err := feedback.ParseFilter(values)
	if err != nil {
		return 0, 0, err
	}
	m := f.MatchingParams(r.OrgID, batch)
	items, err := q.RoutingListCandidates(ctx, db.RoutingListCandidatesParams{OrgID: m.OrgID, Status: m.Status,
		FeedbackType: m.FeedbackType, Source: m.Source, RatingMin: m.RatingMin, RatingMax: m.RatingMax, DimBelow: m.DimBelow,
		Tag: m.Tag, Model: m.Model, AssigneeID: m.AssigneeID, CreatedFrom: m.CreatedFrom, CreatedTo: m.CreatedTo,
		WithDuplicates: m.WithDuplicates, PiiOnly: m.PiiOnly, Q: m.Q, DatasetID: m.DatasetID, SafetyOnly: m.SafetyOnly,
		Since: r.CreatedAt, RowLimit: batch})
	if err != nil || len(items) == 0 {
		return 0, 0, err
	}
	curators, err := q.RoutingRuleListCurators(ctx, db.RoutingRuleListCuratorsParams{RuleID: r.ID, OrgID: r.OrgID})
	if err != nil {
		return 0, 0, err
	}
	if len(curators) == 0 {
		return 0, len(items), nil
	}
	// The turn starts after whoever took the rule's last item.
	next := 0
	if r.LastUserID.Valid {
		if i := slices.IndexFunc(curators, func(c db.RoutingRuleListCuratorsRow) bool { return c.UserID == r.LastUserID.UUID }); i >= 0 {
			next = i + 1
		}
	}
	full := map[uuid.UUID]bool{}
	for _, it := range items {
		placed := false
		for k := range len(curators) {
			i := (next + k) % len(curators)
			c := curators[i]
			if full[c.UserID] || (r.Mode == ByTag && !shares(c.Tags, it.Tags)) {
				continue
			}
			out, err := s.assign(ctx, r, it.ID, c.UserID, c.Email)
			if err != nil {
				return assigned, waiting, err
			}
			if out == atCap {
				full[c.UserID] = true
				continue
			}
			if out == assignedNow {
				assigned++
				next = i + 1
			}
			placed = true // assigned now, or by someone else meanwhile
			break
		}
		if !placed {
			waiting++
		}
	}
	return assigned, waiting, nil
}

type outcome int

const (
	assignedNow outcome = iota
	atCap
	gone // assigned or reviewed by someone else meanwhile
)

// assign gives one item to one curator unless they already hold the cap:
// the curator's lock, the count and the assignment in one transaction.
func (s *Service) assign(ctx context.Context, r db.RoutingRule, item, user uuid.UUID, email string) (outcome, error) {
	out := gone
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.RoutingCuratorGetLock(ctx, user); err != nil {
			return err
		}
		open, err := q.RoutingCountOpen(ctx, db.RoutingCountOpenParams{OrgID: r.OrgID, UserID: uuid.NullUUID{UUID: user, Valid: true}})
		if err != nil {
			return err
		}
		if open >= int64(r.Cap) {
			out = atCap
			return nil
		}
		n, err := q.RoutingFeedbackUpdateAssignee(ctx, db.RoutingFeedbackUpdateAssigneeParams{OrgID: r.OrgID, ID: item, UserID: uuid.NullUUID{UUID: user, Valid: true}})
		if err != nil || n == 0 {
			return err
		}
		out = assignedNow
		if err := q.FeedbackReviewInsert(ctx, db.FeedbackReviewInsertParams{OrgID: r.OrgID, FeedbackID: item,
			ActorLabel: "routing rule " + r.Name, Action: "assign", Note: "Routed to " + email + "."}); err != nil {
			return err
		}
		return q.RoutingRuleUpdateRouted(ctx, db.RoutingRuleUpdateRoutedParams{ID: r.ID, UserID: uuid.NullUUID{UUID: user, Valid: true}})
	})
	return out, err
}

// shares reports whether an item's tags include one of a curator's.
func shares(curator, item []string) bool {
	for _, t := range curator {
		if slices.Contains(item, t) {
			return true
		}
	}
	return false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
