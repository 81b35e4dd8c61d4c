// Package pricing holds what fine-tuning costs at each provider: a price per
// million trained tokens for each base model, each dated with the day it
// was read from the provider's pricing page. Defaults are compiled in;
// each organisation keeps its own table (internal/finetune stores it), so
// one organisation's edits never change another's estimates.
package pricing

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
)

// Micros is an amount of US dollars in millionths, so that sums are exact.
type Micros int64

// Dollars builds an amount from dollars, rounded to the nearest millionth.
func Dollars(d float64) Micros { return Micros(math.Round(d * 1e6)) }

// Dollars returns the amount in dollars.
func (m Micros) Dollars() float64 { return float64(m) / 1e6 }

// String writes dollars with cents, or with four decimals under a dollar so
// that small test runs do not all read "$0.00".
func (m Micros) String() string {
	d := m.Dollars()
	if m != 0 && math.Abs(d) < 1 {
		return fmt.Sprintf("$%.4f", d)
	}
	return fmt.Sprintf("$%.2f", d)
}

// Price is the cost of training one base model at one provider, as one
// row of an organisation's table holds it. A row never changes: a new
// price is a new row, so the row an estimate names keeps saying what the
// estimate used.
type Price struct {
	ID         uuid.UUID // the stored row; uuid.Nil before it is stored
	Provider   string
	BaseModel  string
	PerMillion float64 // US dollars per million trained tokens
	Date       string  // effective date, YYYY-MM-DD
	SetBy      string  // who set it
	SetAt      time.Time
}

// Table is an organisation's prices in force.
type Table struct {
	Prices []Price
}

// DefaultsDate is the day the compiled defaults were read.
const DefaultsDate = "2025-06-01"

// DefaultsSetBy names the compiled defaults as the author of the rows
// copied from them.
const DefaultsSetBy = "Curate defaults"

// Defaults are the providers' published training prices per million
// tokens: OpenAI's pricing page for fine-tuning (supervised and DPO are
// billed alike, per trained token) and Amazon Bedrock's pricing page for
// Claude 3 Haiku model customization ($0.004 per 1,000 tokens).
func Defaults() Table {
	p := func(provider, model string, perMillion float64) Price {
		return Price{Provider: provider, BaseModel: model, PerMillion: perMillion, Date: DefaultsDate, SetBy: DefaultsSetBy}
	}
	return Table{Prices: []Price{
		p("openai", "gpt-4.1-2025-04-14", 25),
		p("openai", "gpt-4.1-mini-2025-04-14", 5),
		p("openai", "gpt-4.1-nano-2025-04-14", 1.5),
		p("openai", "gpt-4o-2024-08-06", 25),
		p("openai", "gpt-4o-mini-2024-07-18", 3),
		p("openai", "gpt-3.5-turbo-0125", 8),
		p("openai", "babbage-002", 0.4),
		p("openai", "davinci-002", 6),
		p("bedrock", "anthropic.claude-3-haiku-20240307-v1:0:200k", 4),
	}}
}

// ErrNoPrice is a base model the table has no price for.
var ErrNoPrice = errors.New("no price")

// snapshots maps the names a provider also answers to (an undated alias,
// or Bedrock's model id without the context window that fine-tuning
// trains) to the snapshot each stands for today: OpenAI's model pages
// list the alias beside the snapshot it points to, and Bedrock fine-tunes
// Claude 3 Haiku as its 200k-context variant.
var snapshots = map[string]map[string]string{
	"openai": {
		"gpt-4.1":       "gpt-4.1-2025-04-14",
		"gpt-4.1-mini":  "gpt-4.1-mini-2025-04-14",
		"gpt-4.1-nano":  "gpt-4.1-nano-2025-04-14",
		"gpt-4o":        "gpt-4o-2024-08-06",
		"gpt-4o-mini":   "gpt-4o-mini-2024-07-18",
		"gpt-3.5-turbo": "gpt-3.5-turbo-0125",
	},
	"bedrock": {
		"claude-3-haiku":                         "anthropic.claude-3-haiku-20240307-v1:0:200k",
		"claude-3-haiku-20240307":                "anthropic.claude-3-haiku-20240307-v1:0:200k",
		"anthropic.claude-3-haiku-20240307-v1:0": "anthropic.claude-3-haiku-20240307-v1:0:200k",
		"anthropic.claude-3-haiku-20240307-v1":   "anthropic.claude-3-haiku-20240307-v1:0:200k",
		"anthropic.claude-3-haiku":               "anthropic.claude-3-haiku-20240307-v1:0:200k",
	},
}

// Snapshot returns the snapshot a provider's model name stands for
// ("gpt-4o-mini" is "gpt-4o-mini-2024-07-18" at OpenAI), and false for a
// name that is already a snapshot or that the provider does not alias.
func Snapshot(provider, model string) (string, bool) {
	s, ok := snapshots[provider][model]
	return s, ok
}

// Lookup returns the price of a base model at a provider. A fine-tuned
// OpenAI model ("ft:<base>:...") costs what its base costs, and an alias
// what its snapshot costs when the table has no row of its own for it.
func (t Table) Lookup(provider, baseModel string) (Price, error) {
	model := baseModel
	if rest, ok := strings.CutPrefix(model, "ft:"); ok {
		model, _, _ = strings.Cut(rest, ":")
	}
	names := []string{model}
	if s, ok := Snapshot(provider, model); ok {
		names = append(names, s)
	}
	for _, name := range names {
		for _, p := range t.Prices {
			if p.Provider == provider && p.BaseModel == name {
				return p, nil
			}
		}
	}
	return Price{}, fmt.Errorf("%w for %s at %s in this organisation's price table", ErrNoPrice, baseModel, provider)
}

// Models lists the base models priced for a provider, sorted.
func (t Table) Models(provider string) []string {
	var out []string
	for _, p := range t.Prices {
		if p.Provider == provider {
			out = append(out, p.BaseModel)
		}
	}
	sort.Strings(out)
	return out
}

// Cost is tokens at a price per million, rounded to the millionth.
func Cost(tokens int64, perMillion float64) Micros {
	return Micros(math.Round(float64(tokens) * perMillion))
}

// Edit is a whole price table as an administrator saves it: every price
// that is to be in force afterwards, and the date on which the prices it
// adds or changes took effect.
type Edit struct {
	Date   string
	Prices []Price // Provider, BaseModel and PerMillion of each
}

// Limits on an edited table.
const (
	maxPrices     = 500
	maxPerMillion = 10000
	maxName       = 200
)

// Check validates an edit, naming each bad entry.
func (e Edit) Check() error {
	v := &errs.Invalid{}
	if _, err := time.Parse(time.DateOnly, e.Date); err != nil {
		v.Add("date", "must be a date written YYYY-MM-DD")
	}
	if len(e.Prices) == 0 || len(e.Prices) > maxPrices {
		v.Add("prices", "must list 1 to %d prices", maxPrices)
	}
	seen := map[string]bool{}
	for i, p := range e.Prices {
		f := fmt.Sprintf("prices[%d]", i)
		switch {
		case strings.TrimSpace(p.Provider) == "" || strings.TrimSpace(p.BaseModel) == "":
			v.Add(f, "needs a provider and a base model")
		case !v.Text(f+".provider", p.Provider, maxName, true) || !v.Text(f+".base_model", p.BaseModel, maxName, true):
			// Text has named the problem.
		case math.IsNaN(p.PerMillion) || p.PerMillion < 0 || p.PerMillion > maxPerMillion:
			v.Add(f+".usd_per_million_tokens", "must be from 0 to %d", maxPerMillion)
		case seen[p.Provider+"\x00"+p.BaseModel]:
			v.Add(f, "%s at %s is listed twice", p.BaseModel, p.Provider)
		}
		seen[p.Provider+"\x00"+p.BaseModel] = true
	}
	return v.Err()
}

// Change is one price an edit adds (Old nil), changes or removes (New
// nil).
type Change struct {
	Old *Price // the row in force before
	New *Price // the price to store, dated with the edit's date
}

// Diff lists what an edit changes in a table: new prices, other amounts
// and removed prices, in the edit's order and then the table's. A price
// whose amount stays keeps its row and its date.
func Diff(t Table, e Edit) []Change {
	key := func(p Price) string { return p.Provider + "\x00" + p.BaseModel }
	current := map[string]Price{}
	for _, p := range t.Prices {
		current[key(p)] = p
	}
	var out []Change
	kept := map[string]bool{}
	for _, p := range e.Prices {
		k := key(p)
		kept[k] = true
		p.Date = e.Date
		old, ok := current[k]
		switch {
		case !ok:
			out = append(out, Change{New: &p})
		case Dollars(old.PerMillion) != Dollars(p.PerMillion):
			out = append(out, Change{Old: &old, New: &p})
		}
	}
	for _, p := range t.Prices {
		if !kept[key(p)] {
			out = append(out, Change{Old: &p})
		}
	}
	return out
}
