package experiments

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/models"
)

// start starts (or resumes) an experiment once each arm's version is
// served where it will be called. An arm keeps the deployment it was
// called at when that is still served, else takes the newest deployment
// serving its version; the target is asked (GET /v1/models on vLLM) in
// either case. An arm served nowhere is loaded through the registry, on
// the target the other arm is served on (or where its version or model
// was last deployed), as a deployment recorded in the model's history
// under the experiment's key. An arm that cannot be served is refused by
// name, and the experiment stays as it was.
//
// The chosen deployments are locked and recorded on the arms in the
// transaction that starts the experiment: an unload, which locks the
// deployment before checking what uses it, either ran first (and the
// start, finding the deployment no longer served, places the arm again)
// or sees the running experiment and leaves it loaded.
func (s *Service) start(ctx context.Context, actor audit.Actor, orgID uuid.UUID, key, reason string) (Experiment, error) {
	q := db.New(s.Pool)
	e, err := q.ExperimentGetByKey(ctx, db.ExperimentGetByKeyParams{OrgID: orgID, Key: key})
	if err != nil {
		return Experiment{}, errs.NotFound(err)
	}
	if err := canBecome(e.Status, Running); err != nil {
		return Experiment{}, err
	}
	arms, err := q.ExperimentArmList(ctx, e.ID)
	if err != nil {
		return Experiment{}, err
	}
	// An adapter unloaded between being found and being held is found
	// missing the second time, and loaded again.
	for try := 0; ; try++ {
		where, err := s.place(ctx, actor, orgID, e, arms)
		if err == nil {
			err = s.commitStart(ctx, actor, orgID, key, arms, where, reason)
		}
		var gone *unloadedMeanwhile
		if errors.As(err, &gone) && try == 0 {
			continue
		}
		if errors.As(err, &gone) {
			err = &errs.Conflict{Message: gone.Error()}
		}
		if err != nil {
			// What was loaded for a start that did not happen goes after
			// the grace period, unless a start in the meantime uses it.
			if lerr := s.letGo(context.WithoutCancel(ctx), where); lerr != nil {
				return Experiment{}, errors.Join(err, lerr)
			}
			return Experiment{}, err
		}
		return s.Get(ctx, orgID, key)
	}
}

// unloadedMeanwhile is an arm's deployment unloaded after the start found
// it served and before it held it.
type unloadedMeanwhile struct{ arm, version, target string }

func (e *unloadedMeanwhile) Error() string {
	return fmt.Sprintf("The %s arm's version %s was unloaded from %s while the experiment started: start it again.", e.arm, e.version, e.target)
}

// letGo queues the unloading of what was loaded for arms.
func (s *Service) letGo(ctx context.Context, where []models.Where) error {
	var loaded []uuid.UUID
	for _, w := range where {
		if w.Loaded {
			loaded = append(loaded, w.Deployment)
		}
	}
	if len(loaded) == 0 {
		return nil
	}
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, _ *db.Queries) error { return s.Models.ReleaseTx(ctx, tx, loaded) })
}

// place finds where each arm's version is served, loading those served
// nowhere. On a refusal it answers what it placed so far with the error.
func (s *Service) place(ctx context.Context, actor audit.Actor, orgID uuid.UUID, e db.Experiment, arms []db.ExperimentArmListRow) ([]models.Where, error) {
	where := make([]models.Where, len(arms))
	found := make([]bool, len(arms))
	near := uuid.Nil
	var err error
	for i, a := range arms {
		if where[i], found[i], err = s.Models.Confirm(ctx, orgID, a.ModelVersionID, a.DeploymentID.UUID); err != nil {
			return nil, armRefused(a, err)
		}
		if found[i] && near == uuid.Nil {
			near = where[i].TargetID
		}
	}
	for i, a := range arms {
		if found[i] {
			continue
		}
		why := fmt.Sprintf("For the %s arm of the experiment %q (%s).", a.Name, e.Name, e.Key)
		if where[i], err = s.Models.LoadFor(ctx, actor, orgID, a.ModelVersionID, near, e.Key, why); err != nil {
			return where, armRefused(a, err)
		}
		if near == uuid.Nil {
			near = where[i].TargetID
		}
	}
	return where, nil
}

// commitStart holds each arm's deployment, records it on the arm and
// starts the experiment, in one transaction.
func (s *Service) commitStart(ctx context.Context, actor audit.Actor, orgID uuid.UUID, key string, arms []db.ExperimentArmListRow,
	where []models.Where, reason string) error {
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		e, err := lockByKey(ctx, q, orgID, key)
		if err != nil {
			return err
		}
		if err := canBecome(e.Status, Running); err != nil {
			return err
		}
		placed := map[string]any{}
		for i, a := range arms {
			w := where[i]
			at := uuid.NullUUID{UUID: w.Deployment, Valid: w.Deployment != uuid.Nil}
			if at.Valid {
				held, err := s.Models.HoldTx(ctx, tx, w.Deployment)
				if err != nil {
					return err
				}
				if !held {
					return &unloadedMeanwhile{arm: a.Name, version: a.Version, target: w.Target}
				}
			}
			if err := q.ExperimentArmUpdateDeployment(ctx, db.ExperimentArmUpdateDeploymentParams{ExperimentID: e.ID, Idx: a.Idx, DeploymentID: at}); err != nil {
				return err
			}
			placed[a.Name] = map[string]any{"version": a.Version, "target": w.Target, "model": w.Model, "loaded": w.Loaded}
		}
		if err := s.setStatus(ctx, tx, q, actor, e, Running, "", reason); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "experiment.arms_served", TargetType: "experiment",
			TargetID: e.ID.String(), Details: map[string]any{"key": e.Key, "arms": placed}})
	})
}

// armRefused names the arm and its version in a refusal the registry
// explained; other errors pass as they are.
func armRefused(a db.ExperimentArmListRow, err error) error {
	var ns *models.NotServed
	if errors.As(err, &ns) {
		return &errs.Conflict{Message: fmt.Sprintf("The %s arm's version %s is not served where it will be called and cannot be loaded: %s",
			a.Name, a.Version, strings.TrimSuffix(ns.Reason, ".")+".")}
	}
	return err
}
