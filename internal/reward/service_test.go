package reward_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/reward"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var admin = audit.Actor{Kind: "user", ID: uuid.New(), Label: "ada@acme.test"}

func TestVersions(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	var org, other uuid.UUID
	for slug, id := range map[string]*uuid.UUID{"acme": &org, "globex": &other} {
		if err := pool.QueryRow(ctx, "INSERT INTO organizations (slug, name) VALUES ($1, $1) RETURNING id", slug).Scan(id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "INSERT INTO users (id, org_id, email, password_hash, role) VALUES ($1, $2, $3, 'x', 'admin')", admin.ID, org, admin.Label); err != nil {
		t.Fatal(err)
	}
	svc := reward.New(pool)

	// First use seeds the design's formula as default version 1.
	def, err := svc.Latest(ctx, org, "")
	if err != nil {
		t.Fatal(err)
	}
	if def.Name != "default" || def.Version != 1 || def.Formula != reward.Default.String() || def.CreatedBy != "system" {
		t.Errorf("seeded default: %+v", def)
	}

	v2, err := svc.Create(ctx, admin, org, reward.NewVersion{Weights: json.RawMessage(`{"judge": 0.7, "risk": -0.3}`)})
	if err != nil {
		t.Fatal(err)
	}
	if v2.Name != "default" || v2.Version != 2 || v2.Formula != "R = 0.7·judge − 0.3·risk" || v2.CreatedBy != admin.Label {
		t.Errorf("second version: %+v", v2)
	}
	latest, err := svc.Latest(ctx, org, "default")
	if err != nil || latest.ID != v2.ID {
		t.Errorf("latest %+v, %v; want version 2", latest, err)
	}
	// Version 1 is still what it was.
	if got, err := svc.Get(ctx, org, def.ID); err != nil || got.Formula != reward.Default.String() {
		t.Errorf("version 1 now %+v, %v", got, err)
	}
	if _, err := pool.Exec(ctx, "UPDATE reward_formulas SET weights = '[{\"scorer\":\"judge\",\"weight\":1}]' WHERE id = $1", def.ID); err == nil {
		t.Error("a version was updated in place")
	}

	judgeOnly, err := svc.Create(ctx, admin, org, reward.NewVersion{Name: "judge-only", Weights: json.RawMessage(`{"judge": 1}`)})
	if err != nil || judgeOnly.Version != 1 {
		t.Fatalf("a new name: %+v, %v", judgeOnly, err)
	}
	list, err := svc.List(ctx, org)
	if err != nil || len(list) != 3 || list[0].Version != 2 || list[1].Version != 1 || list[2].Name != "judge-only" {
		t.Errorf("list %+v, %v", list, err)
	}

	// Bad input names its field and writes nothing.
	_, err = svc.Create(ctx, admin, org, reward.NewVersion{Name: "Bad Name", Weights: json.RawMessage(`{"judge": "high"}`)})
	var inv *errs.Invalid
	if !errors.As(err, &inv) || inv.ByField()["name"] == "" || inv.ByField()["weights.judge"] != "must be a number" {
		t.Errorf("bad input: %v", err)
	}
	if _, err := svc.Create(ctx, admin, org, reward.NewVersion{}); !errors.As(err, &inv) || inv.ByField()["weights"] != "is required" {
		t.Errorf("no weights: %v", err)
	}
	var audited int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit_log WHERE org_id = $1 AND action = 'reward_formula.create'", org).Scan(&audited); err != nil || audited != 2 {
		t.Errorf("audited %d, %v; want 2", audited, err)
	}

	// Another organisation sees only its own default, and not our ids.
	theirs, err := svc.List(ctx, other)
	if err != nil || len(theirs) != 1 || theirs[0].Version != 1 {
		t.Errorf("other organisation: %+v, %v", theirs, err)
	}
	if _, err := svc.Get(ctx, other, v2.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation's version: %v", err)
	}
	if _, err := svc.Latest(ctx, org, "missing"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unknown name: %v", err)
	}
}
