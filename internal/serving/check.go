package serving

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/outbound"
)

// What a vLLM target serves is asked of it (GET /v1/models), and every
// answer is kept as the target's last check: by the periodic serving
// check, and by each deployment that loads or verifies something there.
// Targets of the other kinds serve what they were given, as far as Curate
// can tell, and are not asked.

// DefaultPoll is how often the serving check asks every target what it
// serves when CURATE_SERVING_POLL is unset.
const DefaultPoll = 30 * time.Second

// pollTimeout bounds one periodic question to a target: the check asks
// again soon, so it does not retry.
const pollTimeout = 10 * time.Second

// Polled reports whether targets of a kind are asked what they serve.
func Polled(kind string) bool { return kind == KindVLLM || kind == KindVLLMPooling }

// Check is what a target answered when last asked what it serves.
type Check struct {
	TargetID  uuid.UUID `json:"-"`
	CheckedAt time.Time `json:"checked_at"`
	Healthy   bool      `json:"healthy"`
	// Error says why the target could not be asked, in words.
	Error string `json:"error,omitempty"`
	// Models are the ids the target listed.
	Models []string `json:"models"`
}

func checkOf(c db.ServingCheck) Check {
	return Check{TargetID: c.TargetID, CheckedAt: c.CheckedAt, Healthy: c.Healthy, Error: c.Error, Models: c.Models}
}

// Lists reports whether the check found name listed.
func (c Check) Lists(name string) bool {
	for _, m := range c.Models {
		if m == name {
			return true
		}
	}
	return false
}

// Models asks a vLLM target what it serves, with the retries of Attempts,
// and keeps the answer as the target's last check.
func (s *Service) Models(ctx context.Context, t db.ServingTarget) ([]Served, error) {
	c, err := s.VLLM(t)
	if err != nil {
		return nil, err
	}
	served, err := c.Models(ctx)
	return served, s.record(ctx, t, served, err)
}

// Poll asks a vLLM target once what it serves, within a short timeout,
// and keeps the answer as its last check.
func (s *Service) Poll(ctx context.Context, t db.ServingTarget) ([]Served, error) {
	c, err := s.VLLM(t)
	if err != nil {
		return nil, s.record(ctx, t, nil, err)
	}
	c.Attempts = 1
	ask, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	served, err := c.Models(ask)
	return served, s.record(ctx, t, served, err)
}

// record keeps what the target answered; a question the caller gave up
// on (its own context ended) says nothing of the target and is not kept.
func (s *Service) record(ctx context.Context, t db.ServingTarget, served []Served, err error) error {
	if ctx.Err() != nil {
		return err
	}
	p := db.ServingCheckInsertOrUpdateParams{TargetID: t.ID, OrgID: t.OrgID, Healthy: err == nil, Models: []string{}}
	if err != nil {
		p.Error = outbound.Describe(err)
	} else {
		for _, m := range served {
			p.Models = append(p.Models, m.ID)
		}
	}
	if rerr := db.New(s.Pool).ServingCheckInsertOrUpdate(ctx, p); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// LastCheck is a target's last check; ok is false when it was never
// asked.
func (s *Service) LastCheck(ctx context.Context, orgID, targetID uuid.UUID) (Check, bool, error) {
	c, err := db.New(s.Pool).ServingCheckGet(ctx, db.ServingCheckGetParams{OrgID: orgID, TargetID: targetID})
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Check{}, false, nil
		}
		return Check{}, false, err
	}
	return checkOf(c), true, nil
}

// Checks are the organisation's targets' last checks, by target.
func (s *Service) Checks(ctx context.Context, orgID uuid.UUID) (map[uuid.UUID]Check, error) {
	rows, err := db.New(s.Pool).ServingCheckList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]Check, len(rows))
	for _, r := range rows {
		out[r.TargetID] = checkOf(r)
	}
	return out, nil
}

// PolledTargets lists every organisation's targets that are asked what they
// serve, for the periodic check.
func (s *Service) PolledTargets(ctx context.Context) ([]db.ServingTarget, error) {
	return db.New(s.Pool).ServingTargetListPolled(ctx)
}
