package routing_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/overview"
	"github.com/curate/curate/internal/routing"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var admin = audit.Actor{Kind: "user", Label: "ad@acme.test"}

type fixture struct {
	pool  *pgxpool.Pool
	org   uuid.UUID
	svc   *routing.Service
	fb    *feedback.Service
	users map[string]uuid.UUID
}

func newFixture(t *testing.T, curators ...string) fixture {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	acc := accounts.New(pool, accounts.DefaultSessionTTL)
	org, err := acc.EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{pool: pool, org: org.ID, svc: routing.New(pool), fb: feedback.New(pool), users: map[string]uuid.UUID{}}
	for _, name := range curators {
		u, err := acc.CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: name + "@acme.test", Role: "curator", Password: "test-password-123"})
		if err != nil {
			t.Fatal(err)
		}
		f.users[name] = u.ID
	}
	return f
}

// items stores n items of a type with tags, one request each.
func (f fixture) items(t *testing.T, n int, typ string, tags ...string) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for range n {
		row, _, err := f.fb.Ingest(context.Background(), f.org, "api", feedback.Item{Query: "q " + uuid.NewString(), Response: "r",
			FeedbackType: typ, Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, row.ID)
	}
	return ids
}

func (f fixture) assignee(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var email *string
	if err := f.pool.QueryRow(context.Background(), "SELECT u.email FROM feedback f LEFT JOIN users u ON u.id = f.assignee_id WHERE f.id = $1", id).
		Scan(&email); err != nil {
		t.Fatal(err)
	}
	if email == nil {
		return ""
	}
	return (*email)[:len(*email)-len("@acme.test")]
}

func (f fixture) curators(names ...string) []routing.Curator {
	var out []routing.Curator
	for _, n := range names {
		out = append(out, routing.Curator{UserID: f.users[n]})
	}
	return out
}

// A rule on thumbs-down hands new items to its three curators in turn
// until each holds its cap of 2; items from before the rule, and
// thumbs-up, are left alone. Once a curator reviews one, the next item
// waiting goes to them, and each curator's Overview counts what they
// were given.
func TestRoundRobinWithCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, "ann", "bob", "cat")
	before := f.items(t, 1, "thumbs_down")
	if _, err := f.pool.Exec(ctx, "UPDATE feedback SET created_at = now() - interval '1 hour' WHERE id = $1", before[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateRule(ctx, admin, f.org, routing.NewRule{Name: "Thumbs down", Filter: url.Values{"type": {"thumbs_down"}},
		Mode: routing.RoundRobin, Curators: f.curators("ann", "bob", "cat"), Cap: 2}); err != nil {
		t.Fatal(err)
	}
	down := f.items(t, 8, "thumbs_down")
	up := f.items(t, 2, "thumbs_up")
	res, err := f.svc.Route(ctx, f.org)
	if err != nil {
		t.Fatal(err)
	}
	if res.Assigned != 6 || res.Waiting != 2 {
		t.Errorf("routed %+v, want 6 assigned and 2 waiting", res)
	}
	want := []string{"ann", "bob", "cat", "ann", "bob", "cat", "", ""}
	for i, id := range down {
		if got := f.assignee(t, id); got != want[i] {
			t.Errorf("item %d went to %q, want %q", i, got, want[i])
		}
	}
	for _, id := range append(before, up...) {
		if got := f.assignee(t, id); got != "" {
			t.Errorf("an item the rule does not cover went to %s", got)
		}
	}

	// bob approves one of his: the next waiting item is his.
	if _, err := f.pool.Exec(ctx, "UPDATE feedback SET status = 'approved' WHERE id = $1", down[1]); err != nil {
		t.Fatal(err)
	}
	if res, err := f.svc.Route(ctx, f.org); err != nil || res.Assigned != 1 {
		t.Fatalf("second pass %+v %v", res, err)
	}
	if got := f.assignee(t, down[6]); got != "bob" {
		t.Errorf("the freed slot went to %q", got)
	}
	ov := overview.New(f.pool, nil)
	sum, err := ov.Summarize(ctx, f.org, f.users["bob"])
	if err != nil {
		t.Fatal(err)
	}
	if sum.MineAll != 3 || sum.MineWaiting != 2 {
		t.Errorf("bob's assignments: %d waiting of %d, want 2 of 3", sum.MineWaiting, sum.MineAll)
	}
	var history string
	if err := f.pool.QueryRow(ctx, "SELECT actor_label || ': ' || note FROM feedback_reviews WHERE feedback_id = $1 AND action = 'assign'", down[0]).
		Scan(&history); err != nil || history != "routing rule Thumbs down: Routed to ann@acme.test." {
		t.Errorf("the item's history says %q (%v)", history, err)
	}
}

// By tag: billing items go to the billing curators in turn, safety items
// to the safety one, untagged items to nobody; a team rule hands items to
// the team's members.
func TestByTagAndTeam(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, "ann", "bob", "cat", "dan")
	cs := f.curators("ann", "bob", "cat")
	cs[0].Tags, cs[1].Tags, cs[2].Tags = []string{"billing"}, []string{"Billing", "refunds"}, []string{"safety"}
	if _, err := f.svc.CreateRule(ctx, admin, f.org, routing.NewRule{Name: "By topic", Mode: routing.ByTag, Curators: cs, Cap: 10}); err != nil {
		t.Fatal(err)
	}
	billing := f.items(t, 3, "thumbs_down", "billing")
	safety := f.items(t, 1, "thumbs_up", "safety")
	plain := f.items(t, 1, "thumbs_down")
	if _, err := f.svc.Route(ctx, f.org); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"ann", "bob", "ann"} {
		if got := f.assignee(t, billing[i]); got != want {
			t.Errorf("billing item %d went to %q, want %q", i, got, want)
		}
	}
	if got := f.assignee(t, safety[0]); got != "cat" {
		t.Errorf("the safety item went to %q", got)
	}
	if got := f.assignee(t, plain[0]); got != "" {
		t.Errorf("the untagged item went to %q", got)
	}

	team, err := f.svc.CreateTeam(ctx, admin, f.org, "Night shift", f.curators("dan", "cat"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateRule(ctx, admin, f.org, routing.NewRule{Name: "Leftovers", Mode: routing.RoundRobin, TeamID: team.ID, Cap: 1}); err != nil {
		t.Fatal(err)
	}
	later := f.items(t, 3, "thumbs_down")
	if _, err := f.svc.Route(ctx, f.org); err != nil {
		t.Fatal(err)
	}
	// The team's members by e-mail: cat, then dan; cat already holds one
	// item (the safety one), which the cap of 1 counts.
	for i, want := range []string{"dan", "", ""} {
		if got := f.assignee(t, later[i]); got != want {
			t.Errorf("team item %d went to %q, want %q", i, got, want)
		}
	}
	rules, err := f.svc.Rules(ctx, f.org)
	if err != nil || len(rules) != 2 || rules[0].Routed != 4 || rules[1].Team != "Night shift" || rules[1].Routed != 1 {
		t.Errorf("rules %+v %v", rules, err)
	}
}

// Routing passes running at once, in many processes, never give a curator
// more than the cap: 40 items, a cap of 5 and two rules naming the same
// curator, each run by four goroutines at once, assign exactly 5.
func TestCapUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, "ann")
	for _, name := range []string{"Downs", "Everything"} {
		filter := url.Values{}
		if name == "Downs" {
			filter.Set("type", "thumbs_down")
		}
		if _, err := f.svc.CreateRule(ctx, admin, f.org, routing.NewRule{Name: name, Filter: filter, Mode: routing.RoundRobin,
			Curators: f.curators("ann"), Cap: 5}); err != nil {
			t.Fatal(err)
		}
	}
	f.items(t, 40, "thumbs_down")
	var wg sync.WaitGroup
	start := make(chan struct{})
	errc := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			<-start
			_, err := f.svc.Route(ctx, f.org)
			errc <- err
		})
	}
	close(start)
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM feedback WHERE assignee_id = $1", f.users["ann"]).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("ann holds %d items, the cap is 5", n)
	}
}

// Bad rules are refused field by field and store nothing.
func TestRuleRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, "ann")
	other := newFixture(t, "zed")
	cases := []struct {
		name string
		in   routing.NewRule
		want string
	}{
		{"everything wrong", routing.NewRule{Filter: url.Values{"type": {"shouting"}}, Mode: "random", Cap: 0},
			"cap,curators,filter.type,mode,name"},
		{"someone else's user", routing.NewRule{Name: "x", Mode: routing.RoundRobin, Cap: 3, Curators: other.curators("zed")}, "curators[0]"},
		{"reviewed items", routing.NewRule{Name: "x", Filter: url.Values{"status": {"approved"}}, Mode: routing.RoundRobin, Cap: 3,
			Curators: f.curators("ann")}, "filter.status"},
		{"by tag without tags", routing.NewRule{Name: "x", Mode: routing.ByTag, Cap: 3, Curators: f.curators("ann")}, "curators"},
		{"both", routing.NewRule{Name: "x", Mode: routing.RoundRobin, Cap: 3, Curators: f.curators("ann"), TeamID: uuid.New()}, "team_id"},
		{"no such team", routing.NewRule{Name: "x", Mode: routing.RoundRobin, Cap: 3, TeamID: uuid.New()}, "team_id"},
	}
	for _, c := range cases {
		_, err := f.svc.CreateRule(ctx, admin, f.org, c.in)
		var inv *errs.Invalid
		if !errors.As(err, &inv) || strings.Join(inv.Fields(), ",") != c.want {
			t.Errorf("%s: %v, want fields %s", c.name, err, c.want)
		}
	}
	if rules, err := f.svc.Rules(ctx, f.org); err != nil || len(rules) != 0 {
		t.Errorf("refused rules stored: %+v %v", rules, err)
	}
	if err := f.svc.SetActive(ctx, admin, f.org, uuid.New(), false); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unknown rule: %v", err)
	}
}
