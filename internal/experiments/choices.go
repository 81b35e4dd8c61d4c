package experiments

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/models"
)

// Choices is what the new-experiment form offers: the registered models,
// the chosen one's versions with where each is served, and the two arms to
// preselect.
type Choices struct {
	Models             []string
	Model              string
	Versions           []Candidate
	Control, Treatment uuid.UUID
}

// Candidate is a version an arm can send traffic to.
type Candidate struct {
	ID      uuid.UUID
	Version string
	Status  string
	Aliases []string
	// Target is the serving target the version answers on, "" when it is
	// deployed nowhere.
	Target string
}

// maxCandidates is how many of a model's versions the form offers, newest
// first.
const maxCandidates = 100

// Choices reads the form's choices. model names the registered model ("" is
// the only one, or the treatment's); treatment, when set, is the version
// whose page the form was opened from.
func (s *Service) Choices(ctx context.Context, orgID uuid.UUID, model string, treatment uuid.UUID) (Choices, error) {
	var out Choices
	if treatment != uuid.Nil {
		v, err := s.Models.Get(ctx, orgID, treatment)
		if err != nil {
			return out, err
		}
		if model == "" {
			model = v.Name
		}
		if v.Name == model && v.Status != models.StatusArchived {
			out.Treatment = v.ID
		}
	}
	registered, err := s.Models.Models(ctx, orgID)
	if err != nil {
		return out, err
	}
	for _, m := range registered {
		out.Models = append(out.Models, m.Name)
	}
	if model == "" && len(out.Models) == 1 {
		model = out.Models[0]
	}
	if !slices.Contains(out.Models, model) {
		return out, nil // no model chosen yet: the form asks for one first
	}
	out.Model = model
	versions, _, err := s.Models.List(ctx, orgID, models.Filter{Name: model}, nil, maxCandidates)
	if err != nil {
		return out, err
	}
	for _, v := range versions {
		if v.Status == models.StatusArchived {
			continue // an archived version takes no traffic
		}
		served, err := s.Models.Served(ctx, orgID, v.ID)
		if err != nil {
			return out, err
		}
		out.Versions = append(out.Versions, Candidate{ID: v.ID, Version: v.Version, Status: v.Status, Aliases: v.Aliases, Target: served.Target})
	}
	// The treatment: the version asked for, else the newest one production
	// does not serve. The control: production's, else the newest other.
	var production uuid.UUID
	for _, c := range out.Versions {
		if slices.Contains(c.Aliases, models.Production) {
			production = c.ID
		}
	}
	for _, c := range out.Versions {
		if out.Treatment == uuid.Nil && c.ID != production {
			out.Treatment = c.ID
		}
	}
	if production != out.Treatment {
		out.Control = production
	}
	for _, c := range out.Versions {
		if out.Control == uuid.Nil && c.ID != out.Treatment {
			out.Control = c.ID
		}
	}
	return out, nil
}
