package finetune

import (
	"context"
	"slices"

	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/provider"
)

// Entry is one provider Curate can launch jobs at.
type Entry struct {
	Label string // shown in forms, e.g. "OpenAI"
	// New builds the client from the configuration. It fails, without
	// calling the provider, when a credential or setting is missing.
	New func(ctx context.Context) (provider.Provider, error)
	// Formats maps each method the provider offers to the export format
	// it trains on.
	Formats map[provider.Method]export.Format
	// AutoEpochs is how many epochs the provider runs when epochs are left
	// "auto", for a training set of n examples; the estimate uses it.
	AutoEpochs func(n int) int
	// MethodEpochs, when set, is AutoEpochs for the methods whose default
	// differs (the local reward model's recipe runs 5).
	MethodEpochs map[provider.Method]int
	// Spelling is how the provider's own API names the hyperparameters:
	// requests may use those names, and jobs report them back in them.
	Spelling provider.Spelling
	// DefaultModel is the base model a launch that names none trains, when
	// its dataset names none either; "" makes the base model required.
	DefaultModel string
	// NoSeed is true for a provider that takes no training seed.
	NoSeed bool
	// Free is true for a provider that runs on this machine: it needs no
	// price, costs nothing and takes nothing from the budget.
	Free bool
}

// Providers maps a provider's name ("openai", "bedrock", "local") to its
// entry; adding a provider is adding an entry.
type Providers map[string]Entry

// Names lists the providers, sorted.
func (r Providers) Names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Methods lists every method some provider offers, sorted.
func (r Providers) Methods() []provider.Method {
	var out []provider.Method
	for _, e := range r {
		for m := range e.Formats {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// BedrockAutoEpochs is Bedrock's default epochCount for Claude 3 Haiku (2).
func BedrockAutoEpochs(int) int { return 2 }
