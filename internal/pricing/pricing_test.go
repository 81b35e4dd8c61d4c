package pricing_test

import (
	"errors"
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
	if err != nil || p.PerMillion != 3 || p.Date != pricing.DefaultsDate {
		t.Errorf("a fine-tuned model costs its base: %+v, %v", p, err)
	}
	if _, err := tab.Lookup("bedrock", "gpt-4o-mini-2024-07-18"); !errors.Is(err, pricing.ErrNoPrice) {
		t.Errorf("a model at the wrong provider: %v", err)
	}
	if got := tab.Models("bedrock"); len(got) != 1 || got[0] != "anthropic.claude-3-haiku-20240307-v1:0:200k" {
		t.Errorf("bedrock models %v", got)
	}
}

// The seed's model names: the undated gpt-4o-mini costs what its current
// snapshot costs ($3 per million, OpenAI's fine-tuning price for
// gpt-4o-mini-2024-07-18), and Bedrock's Claude 3 Haiku id with and
// without its context suffix costs $4 per million ($0.004 per 1,000).
func TestLookupSnapshots(t *testing.T) {
	tab := pricing.Defaults()
	for _, tc := range []struct {
		provider, model string
		perMillion      float64
		snapshot        string
	}{
		{"openai", "gpt-4o-mini", 3, "gpt-4o-mini-2024-07-18"},
		{"openai", "gpt-4o", 25, "gpt-4o-2024-08-06"},
		{"openai", "gpt-4o-mini-2024-07-18", 3, ""},
		{"bedrock", "anthropic.claude-3-haiku-20240307-v1:0", 4, "anthropic.claude-3-haiku-20240307-v1:0:200k"},
		{"bedrock", "anthropic.claude-3-haiku-20240307-v1:0:200k", 4, ""},
		{"bedrock", "claude-3-haiku", 4, "anthropic.claude-3-haiku-20240307-v1:0:200k"},
	} {
		p, err := tab.Lookup(tc.provider, tc.model)
		if err != nil || p.PerMillion != tc.perMillion {
			t.Errorf("%s at %s: %+v, %v; want $%v per million", tc.model, tc.provider, p, err, tc.perMillion)
		}
		snap, ok := pricing.Snapshot(tc.provider, tc.model)
		if snap != tc.snapshot || ok != (tc.snapshot != "") {
			t.Errorf("Snapshot(%s, %s) = %q, %v; want %q", tc.provider, tc.model, snap, ok, tc.snapshot)
		}
	}
	if _, err := tab.Lookup("openai", "anthropic.claude-3-haiku-20240307-v1:0"); !errors.Is(err, pricing.ErrNoPrice) {
		t.Errorf("a Bedrock id at OpenAI: %v", err)
	}
}

// A bad edit is refused naming each entry: an impossible date, a price
// listed twice, a negative price, a NUL in a name.
func TestEditCheck(t *testing.T) {
	bad := pricing.Edit{Date: "2025-02-30", Prices: []pricing.Price{
		{Provider: "openai", BaseModel: "m", PerMillion: 1},
		{Provider: "openai", BaseModel: "m", PerMillion: 2},
		{Provider: "openai", BaseModel: "n", PerMillion: -1},
		{Provider: "openai", BaseModel: "x\x00y", PerMillion: 1},
	}}
	var inv *errs.Invalid
	if err := bad.Check(); !errors.As(err, &inv) {
		t.Fatalf("bad edit: %v", err)
	}
	by := inv.ByField()
	for _, f := range []string{"date", "prices[1]", "prices[2].usd_per_million_tokens", "prices[3].base_model"} {
		if by[f] == "" {
			t.Errorf("no message for %s in %v", f, inv.Errors)
		}
	}
	if err := (pricing.Edit{Date: "2026-01-15"}).Check(); !errors.As(err, &inv) || inv.ByField()["prices"] == "" {
		t.Errorf("an empty table: %v", err)
	}
	good := pricing.Edit{Date: "2026-01-15", Prices: []pricing.Price{{Provider: "openai", BaseModel: "m", PerMillion: 2.5}}}
	if err := good.Check(); err != nil {
		t.Errorf("good edit: %v", err)
	}
}

// Diff finds the added, changed and removed prices; an unchanged price
// (written 3 or 3.0000001, which round to the same millionth) is left
// alone with its own date.
func TestDiff(t *testing.T) {
	cur := pricing.Table{Prices: []pricing.Price{
		{Provider: "openai", BaseModel: "a", PerMillion: 3, Date: "2025-06-01"},
		{Provider: "openai", BaseModel: "b", PerMillion: 5, Date: "2025-06-01"},
		{Provider: "openai", BaseModel: "c", PerMillion: 8, Date: "2025-06-01"},
	}}
	edit := pricing.Edit{Date: "2026-01-15", Prices: []pricing.Price{
		{Provider: "openai", BaseModel: "a", PerMillion: 3.0000001},
		{Provider: "openai", BaseModel: "b", PerMillion: 4},
		{Provider: "bedrock", BaseModel: "d", PerMillion: 1},
	}}
	got := pricing.Diff(cur, edit)
	if len(got) != 3 {
		t.Fatalf("%d changes, want 3: %+v", len(got), got)
	}
	if c := got[0]; c.Old == nil || c.Old.BaseModel != "b" || c.Old.PerMillion != 5 || c.New.PerMillion != 4 || c.New.Date != "2026-01-15" {
		t.Errorf("change of b: %+v %+v", c.Old, c.New)
	}
	if c := got[1]; c.Old != nil || c.New.BaseModel != "d" || c.New.Date != "2026-01-15" {
		t.Errorf("addition of d: %+v %+v", c.Old, c.New)
	}
	if c := got[2]; c.New != nil || c.Old.BaseModel != "c" {
		t.Errorf("removal of c: %+v %+v", c.Old, c.New)
	}
}
