// Package pricing holds what fine-tuning costs at each provider: a price per
// million trained tokens for each base model, with the date the prices were
// read. Defaults are compiled in; an administrator's edits are kept as a JSON
// file in the data directory, which replaces the defaults whole.
package pricing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

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

// Price is the cost of training one base model at one provider.
type Price struct {
	Provider   string  `json:"provider"`
	BaseModel  string  `json:"base_model"`
	PerMillion float64 `json:"usd_per_million_tokens"`
}

// Table is every price, as of Date (YYYY-MM-DD).
type Table struct {
	Date   string  `json:"date"`
	Prices []Price `json:"prices"`
}

// Defaults are the providers' published training prices per million
// tokens: OpenAI's pricing page for fine-tuning (supervised and DPO are
// billed alike, per trained token) and Amazon Bedrock's pricing page for
// Claude 3 Haiku model customization ($0.004 per 1,000 tokens).
func Defaults() Table {
	return Table{Date: "2025-06-01", Prices: []Price{
		{"openai", "gpt-4.1-2025-04-14", 25},
		{"openai", "gpt-4.1-mini-2025-04-14", 5},
		{"openai", "gpt-4.1-nano-2025-04-14", 1.5},
		{"openai", "gpt-4o-2024-08-06", 25},
		{"openai", "gpt-4o-mini-2024-07-18", 3},
		{"openai", "gpt-3.5-turbo-0125", 8},
		{"openai", "babbage-002", 0.4},
		{"openai", "davinci-002", 6},
		{"bedrock", "anthropic.claude-3-haiku-20240307-v1:0:200k", 4},
	}}
}

// ErrNoPrice is a base model the table has no price for.
var ErrNoPrice = errors.New("no price")

// Lookup returns the price of a base model at a provider. A fine-tuned
// OpenAI model ("ft:<base>:...") costs what its base costs.
func (t Table) Lookup(provider, baseModel string) (Price, error) {
	model := baseModel
	if rest, ok := strings.CutPrefix(model, "ft:"); ok {
		model, _, _ = strings.Cut(rest, ":")
	}
	for _, p := range t.Prices {
		if p.Provider == provider && p.BaseModel == model {
			return p, nil
		}
	}
	return Price{}, fmt.Errorf("%w for %s at %s in the price table of %s", ErrNoPrice, baseModel, provider, t.Date)
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

var datePattern = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// Limits on an edited table.
const (
	maxPrices     = 500
	maxPerMillion = 10000
)

// Check validates a table, naming each bad entry.
func (t Table) Check() error {
	v := &errs.Invalid{}
	if !datePattern.MatchString(t.Date) {
		v.Add("date", "must be a date written YYYY-MM-DD")
	}
	if len(t.Prices) == 0 || len(t.Prices) > maxPrices {
		v.Add("prices", "must list 1 to %d prices", maxPrices)
	}
	seen := map[string]bool{}
	for i, p := range t.Prices {
		f := fmt.Sprintf("prices[%d]", i)
		switch {
		case strings.TrimSpace(p.Provider) == "" || strings.TrimSpace(p.BaseModel) == "":
			v.Add(f, "needs a provider and a base model")
		case math.IsNaN(p.PerMillion) || p.PerMillion < 0 || p.PerMillion > maxPerMillion:
			v.Add(f+".usd_per_million_tokens", "must be from 0 to %d", maxPerMillion)
		case seen[p.Provider+"\x00"+p.BaseModel]:
			v.Add(f, "%s at %s is listed twice", p.BaseModel, p.Provider)
		}
		seen[p.Provider+"\x00"+p.BaseModel] = true
	}
	return v.Err()
}

// Store keeps the table in a JSON file, falling back to Defaults while
// there is none. It is safe for concurrent use; several processes sharing a
// data directory see each other's edits because every read opens the file.
type Store struct {
	path string
	mu   sync.Mutex
}

// NewStore keeps the table at path (e.g. <data dir>/fine-tuning-prices.json).
func NewStore(path string) *Store { return &Store{path: path} }

// Get returns the table in force.
func (s *Store) Get(ctx context.Context) (Table, error) {
	if err := ctx.Err(); err != nil {
		return Table{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return Defaults(), nil
	}
	if err != nil {
		return Table{}, err
	}
	var t Table
	if err := json.Unmarshal(b, &t); err != nil {
		return Table{}, fmt.Errorf("price table %s: %w", s.path, err)
	}
	return t, nil
}

// Set checks and stores a table, replacing the file atomically.
func (s *Store) Set(ctx context.Context, t Table) error {
	if err := t.Check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".prices-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.path)
}
