package finetune_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/openaitest"
)

func (e *env) newOrg(t *testing.T, slug string) uuid.UUID {
	t.Helper()
	var org uuid.UUID
	if err := e.pool.QueryRow(context.Background(), "INSERT INTO organizations (slug, name) VALUES ($1, $1) RETURNING id", slug).Scan(&org); err != nil {
		t.Fatal(err)
	}
	return org
}

// withPrice is the table with one price changed.
func withPrice(t pricing.Table, date, model string, perMillion float64) pricing.Edit {
	e := pricing.Edit{Date: date}
	for _, p := range t.Prices {
		if p.BaseModel == model {
			p.PerMillion = perMillion
		}
		e.Prices = append(e.Prices, p)
	}
	return e
}

// One organisation's admin sets gpt-4o-mini to $1000 per million: that
// organisation's estimate uses the new row (and its launch is refused by
// its budget), while another organisation's estimate and launch keep its
// own $3 row. The change is audited old → new; saving the same table
// again changes nothing; a job launched before keeps naming the row it
// was estimated with, which stays readable.
func TestPricesBelongToTheirOrganisation(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	other := e.newOrg(t, "globex")
	vA := e.src.AddPref(e.org, "a v1", finetunetest.Pairs(6), 2)
	vB := e.src.AddPref(other, "b v1", finetunetest.Pairs(6), 2)
	reqA := finetune.Request{VersionID: vA.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO}
	reqB := finetune.Request{VersionID: vB.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO}

	before := e.launch(t, reqA)
	tab, err := e.svc.PriceTable(ctx, e.org)
	if err != nil || len(tab.Prices) != len(pricing.Defaults().Prices) {
		t.Fatalf("seeded table: %d prices, %v", len(tab.Prices), err)
	}
	old, _ := tab.Lookup("openai", mini)
	if !before.PriceID.Valid || before.PriceID.UUID != old.ID || before.PricePerMillion != 3_000_000 || before.PriceDate != pricing.DefaultsDate {
		t.Errorf("job launched at %v, %d, %s; want row %s at $3 of %s", before.PriceID, before.PricePerMillion, before.PriceDate, old.ID, pricing.DefaultsDate)
	}

	changes, err := e.svc.SetPrices(ctx, admin, e.org, withPrice(tab, "2026-01-15", mini, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Old.PerMillion != 3 || changes[0].New.PerMillion != 1000 || changes[0].New.ID == uuid.Nil {
		t.Fatalf("changes %+v", changes)
	}

	// 4 training pairs × 18 tokens × 25 auto epochs = 1,800 tokens.
	estA, err := e.svc.Estimate(ctx, e.org, reqA)
	if err != nil || estA.Cost != pricing.Dollars(1.8) || estA.Price.ID != changes[0].New.ID || estA.Price.Date != "2026-01-15" || estA.Price.SetBy != admin.Label {
		t.Errorf("A's estimate %s with %+v (%v), want $1.80 with the new row", estA.Cost, estA.Price, err)
	}
	if err := e.svc.SetBudget(ctx, admin, e.org, pricing.Dollars(1)); err != nil {
		t.Fatal(err)
	}
	var inv *errs.Invalid
	if _, _, err := e.svc.Launch(ctx, admin, e.org, reqA); !errors.As(err, &inv) || inv.ByField()["budget"] == "" {
		t.Errorf("A's launch at $1000 per million: %v, want refused by the budget", err)
	}

	estB, err := e.svc.Estimate(ctx, other, reqB)
	if err != nil || estB.Cost != 5400 || estB.Price.PerMillion != 3 || estB.Price.Date != pricing.DefaultsDate || estB.Price.ID == old.ID {
		t.Errorf("B's estimate %s with %+v (%v), want $0.0054 with its own $3 row", estB.Cost, estB.Price, err)
	}
	jobB, _, err := e.svc.Launch(ctx, admin, other, reqB)
	if err != nil || jobB.EstimatedCost != 5400 || jobB.PriceID.UUID != estB.Price.ID {
		t.Errorf("B's launch: %+v, %v", jobB, err)
	}

	// The earlier job's row still says $3.
	var perMillion int64
	if err := e.pool.QueryRow(ctx, "SELECT per_million FROM fine_tuning_prices WHERE id = $1 AND superseded_at IS NOT NULL", before.PriceID).Scan(&perMillion); err != nil || perMillion != 3_000_000 {
		t.Errorf("the superseded row: %d, %v", perMillion, err)
	}

	tab, _ = e.svc.PriceTable(ctx, e.org)
	if changes, err := e.svc.SetPrices(ctx, admin, e.org, withPrice(tab, "2026-02-01", mini, 1000)); err != nil || len(changes) != 0 {
		t.Errorf("saving the same prices: %+v, %v", changes, err)
	}
	if p, _ := e.svc.PriceTable(ctx, e.org); p.Prices[0].Date != pricing.DefaultsDate {
		t.Errorf("an unchanged price was re-dated: %+v", p.Prices[0])
	}

	var details []byte
	var n int
	if err := e.pool.QueryRow(ctx, "SELECT count(*), max(details::text) FROM audit_log WHERE action = 'finetune.prices' AND org_id = $1 AND actor_label = $2",
		e.org, admin.Label).Scan(&n, &details); err != nil || n != 1 {
		t.Fatalf("%d price audit entries for A (%v), want 1", n, err)
	}
	var d struct {
		Changes []struct {
			BaseModel string  `json:"base_model"`
			Old       float64 `json:"old_usd_per_million"`
			New       float64 `json:"new_usd_per_million"`
		} `json:"changes"`
	}
	if err := json.Unmarshal(details, &d); err != nil || len(d.Changes) != 1 || d.Changes[0].BaseModel != mini || d.Changes[0].Old != 3 || d.Changes[0].New != 1000 {
		t.Errorf("audit details %s", details)
	}
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM audit_log WHERE action = 'finetune.prices' AND org_id = $1", other).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d price audit entries for B", n)
	}
}

// A bad edit changes nothing and names its fields.
func TestSetPricesRefusesABadTable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(openaitest.New(t))})
	bad := pricing.Edit{Date: "yesterday", Prices: []pricing.Price{{Provider: "openai", BaseModel: mini, PerMillion: -3}}}
	var inv *errs.Invalid
	if _, err := e.svc.SetPrices(ctx, admin, e.org, bad); !errors.As(err, &inv) || inv.ByField()["date"] == "" || inv.ByField()["prices[0].usd_per_million_tokens"] == "" {
		t.Fatalf("bad edit: %v", err)
	}
	tab, err := e.svc.PriceTable(ctx, e.org)
	if p, _ := tab.Lookup("openai", mini); err != nil || p.PerMillion != 3 {
		t.Errorf("after a refused edit: %+v, %v", p, err)
	}
}
