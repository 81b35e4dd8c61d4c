package loops

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/pairs"
)

// Choice is one value a policy's form offers, with its words.
type Choice struct {
	Value, Label string
}

// Choices are what a policy's form offers: the organisation's providers
// and their methods, golden sets, judge endpoints and templates, and
// serving targets, and its gate when it set one.
type Choices struct {
	Providers   []Choice
	Methods     []string
	PairMethods []string
	GoldenSets  []Choice
	Endpoints   []string
	Templates   []string
	Targets     []string
	// Gate names the golden set the organisation's gate judges on, "" when
	// it set none.
	Gate   string
	GateID uuid.UUID
}

// Choices lists what a policy's form offers.
func (s *Service) Choices(ctx context.Context, orgID uuid.UUID) (Choices, error) {
	var out Choices
	out.PairMethods = pairs.GenerateMethods
	if s.FineTune != nil {
		names := s.FineTune.Providers.Names()
		slices.Sort(names)
		for _, n := range names {
			out.Providers = append(out.Providers, Choice{n, s.FineTune.Providers[n].Label})
		}
		for _, m := range s.FineTune.Providers.Methods() {
			out.Methods = append(out.Methods, string(m))
		}
	}
	if s.Eval != nil {
		sets, err := s.Eval.GoldenSets(ctx, orgID)
		if err != nil {
			return out, err
		}
		for _, g := range sets {
			out.GoldenSets = append(out.GoldenSets, Choice{g.VersionID.String(), g.Name})
		}
		if g, ok, err := s.Eval.GetGate(ctx, orgID); err != nil {
			return out, err
		} else if ok {
			out.Gate, out.GateID = g.GoldenSet, g.GoldenSetVersionID
		}
		ch, err := s.Eval.StartChoices(ctx, orgID)
		if err != nil {
			return out, err
		}
		for _, e := range ch.Endpoints {
			out.Endpoints = append(out.Endpoints, e.Name)
		}
		for _, t := range ch.Templates {
			if !slices.Contains(out.Templates, t.Name) {
				out.Templates = append(out.Templates, t.Name)
			}
		}
	}
	if s.Models != nil && s.Models.Serving != nil {
		ts, err := s.Models.Serving.List(ctx, orgID)
		if err != nil {
			return out, err
		}
		for _, t := range ts {
			out.Targets = append(out.Targets, t.Name)
		}
	}
	return out, nil
}

// GateOf is the organisation's gate, for pages that say what judges a
// loop's versions.
func (s *Service) GateOf(ctx context.Context, orgID uuid.UUID) (eval.Gate, bool, error) {
	return s.gate(ctx, orgID)
}
