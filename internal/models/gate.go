package models

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// Production is the alias the promotion gate guards.
const Production = "production"

// Gate is the promotion gate (internal/eval): what it says of a version
// before the production alias moves to it.
type Gate interface {
	Status(ctx context.Context, orgID, versionID uuid.UUID) (GateStatus, error)
}

// GateStatus is the gate's word on a version.
type GateStatus struct {
	Set        bool      // the organisation has named its gate's golden set
	GoldenSet  string    // its name
	Evaluation uuid.UUID // the finished evaluation the gate read; Nil when none
	Reasons    []string  // why the version fails; none when it passes
	// Next says what would let the version through, when it fails: a
	// first evaluation, a leak check, or a better version.
	Next      string
	Overrides []Override
}

// Override is an admin's written decision to deploy past a failing gate.
type Override struct {
	Reason string
	By     string
	At     time.Time
}

// Blocks reports whether the gate stops the version going to production:
// it fails, and no admin overrode it.
func (g GateStatus) Blocks() bool {
	return g.Set && len(g.Reasons) > 0 && len(g.Overrides) == 0
}

// GateStatus asks the gate about a version; an unset gate (or none wired)
// answers Set false.
func (s *Service) GateStatus(ctx context.Context, orgID, versionID uuid.UUID) (GateStatus, error) {
	if s.Gate == nil {
		return GateStatus{}, nil
	}
	return s.Gate.Status(ctx, orgID, versionID)
}

// checkGate refuses to move production to a version the gate blocks. A
// reward model passes: the gate evaluates answers, and it writes none.
func (s *Service) checkGate(ctx context.Context, orgID, versionID uuid.UUID, alias string) error {
	if alias != Production {
		return nil
	}
	v, err := db.New(s.Pool).ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return errs.NotFound(err)
	}
	if v.ModelVersion.Kind == KindReward {
		return nil
	}
	st, err := s.GateStatus(ctx, orgID, versionID)
	if err != nil {
		return err
	}
	if st.Blocks() {
		next := st.Next
		if next == "" {
			next = "Evaluate the version on the gate's golden set."
		}
		return &errs.Conflict{Message: "The evaluation gate blocks production: " + strings.Join(st.Reasons, " ") + " " + next +
			" An admin may instead override the gate with a written reason."}
	}
	return nil
}
