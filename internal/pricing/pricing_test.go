package pricing_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/pricing"
)

func TestMicrosString(t *testing.T) {
	for _, c := range []struct {
		m    pricing.Micros
		want string
	}{
		{0, "$0.00"}, {5400, "$0.0054"}, {12288, "$0.0123"}, {pricing.Dollars(47), "$47.00"}, {pricing.Dollars(1.005), "$1.00"}, {999_999, "$1.0000"},
	} {
		if got := c.m.String(); got != c.want {
			t.Errorf("%d micros: %q, want %q", c.m, got, c.want)
		}
	}
}

// Cost is tokens times the price per million: 1,800 tokens at $3 per
// million is $0.0054, and a million tokens cost the price itself.
func TestCost(t *testing.T) {
	if got := pricing.Cost(1800, 3); got != 5400 {
		t.Errorf("1800 tokens at $3/M: %d micros, want 5400", got)
	}
	if got := pricing.Cost(1_000_000, 25); got != pricing.Dollars(25) {
		t.Errorf("a million tokens at $25/M: %s", got)
	}
}

func TestLookup(t *testing.T) {
	tab := pricing.Defaults()
	p, err := tab.Lookup("openai", "ft:gpt-4o-mini-2024-07-18:acme:support:abc123")
	if err != nil || p.PerMillion != 3 {
		t.Errorf("a fine-tuned model costs its base: %+v, %v", p, err)
	}
	if _, err := tab.Lookup("bedrock", "gpt-4o-mini-2024-07-18"); !errors.Is(err, pricing.ErrNoPrice) {
		t.Errorf("a model at the wrong provider: %v", err)
	}
	if got := tab.Models("bedrock"); len(got) != 1 || got[0] != "anthropic.claude-3-haiku-20240307-v1:0:200k" {
		t.Errorf("bedrock models %v", got)
	}
}

// The store serves the defaults until an edit is saved, refuses a bad
// table naming the entry, and keeps a good one.
func TestStore(t *testing.T) {
	ctx := context.Background()
	s := pricing.NewStore(filepath.Join(t.TempDir(), "prices.json"))
	got, err := s.Get(ctx)
	if err != nil || got.Date != pricing.Defaults().Date {
		t.Fatalf("before an edit: %+v, %v", got, err)
	}
	bad := pricing.Table{Date: "June 1", Prices: []pricing.Price{
		{Provider: "openai", BaseModel: "m", PerMillion: 1},
		{Provider: "openai", BaseModel: "m", PerMillion: 2},
		{Provider: "openai", BaseModel: "n", PerMillion: -1},
	}}
	var inv *errs.Invalid
	if err := s.Set(ctx, bad); !errors.As(err, &inv) {
		t.Fatalf("bad table: %v", err)
	}
	by := inv.ByField()
	for _, f := range []string{"date", "prices[1]", "prices[2].usd_per_million_tokens"} {
		if by[f] == "" {
			t.Errorf("no message for %s in %v", f, inv.Errors)
		}
	}
	good := pricing.Table{Date: "2026-01-15", Prices: []pricing.Price{{Provider: "openai", BaseModel: "gpt-4o-mini-2024-07-18", PerMillion: 2.5}}}
	if err := s.Set(ctx, good); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctx)
	if err != nil || got.Date != "2026-01-15" || len(got.Prices) != 1 || got.Prices[0].PerMillion != 2.5 {
		t.Errorf("after saving: %+v, %v", got, err)
	}
}
