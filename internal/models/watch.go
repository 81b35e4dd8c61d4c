package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/serving"
)

// Serving truth, watched: the serving check (a periodic job, queued by one
// process at a time) asks every vLLM target what it serves each
// CURATE_SERVING_POLL and keeps the answer. A deployment that an alias or
// a running experiment's arm calls and that its target no longer lists is
// recorded as no longer served (which takes the arm out of assignment),
// opens an alert keyed on its version, and is reloaded through the
// deployment path: a new deployment of the same version on the same
// target, recorded as a reload with the reason, which moves the alias to
// it (or calls the arms at it) once the target lists it. Until then the
// alias resolves to nothing (503) or, where its admin chose so, to its
// last version still listed.

// KindServingMissing is the alert a version missing from its target
// opens.
const KindServingMissing = "serving_missing"

// Fallbacks an admin can choose for an alias whose version its target does
// not list: none (resolving answers 503), or the alias's last version that
// is still listed.
const (
	FallbackNone        = "none"
	FallbackLastHealthy = "last_healthy"
)

// Fallbacks lists the choices.
var Fallbacks = []string{FallbackNone, FallbackLastHealthy}

// actionReload puts back what an alias's deployment loaded, under a new
// name, once its target stopped listing it.
const actionReload = "reload"

// watcher signs what the serving check does.
var watcher = audit.Actor{Kind: "system", Label: checkedBy}

func (s *Service) poll() time.Duration { return cmp.Or(s.ServingPoll, serving.DefaultPoll) }

// servingAlertKey keys a version's serving alert: on the registered
// version, since a reload serves it under another name.
func servingAlertKey(versionID uuid.UUID) string {
	return KindServingMissing + ":" + versionID.String()
}

// CheckServing asks every polled target of every organisation what it
// serves, keeps each answer, and reloads what something calls that its
// target stopped listing. One target failing to answer is recorded on it
// and does not stop the others.
func (s *Service) CheckServing(ctx context.Context) error {
	targets, err := s.Serving.PolledTargets(ctx)
	if err != nil {
		return err
	}
	// A few targets at a time: one slow to answer holds up no other.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errsOut []error
		slots   = make(chan struct{}, checkParallel)
	)
	for _, t := range targets {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			served, err := s.Serving.Poll(ctx, t)
			if err != nil {
				// Recorded as the target's last check: resolving its
				// aliases answers 503 until it answers again.
				return
			}
			if err := s.reconcile(ctx, t, served); err != nil {
				mu.Lock()
				errsOut = append(errsOut, fmt.Errorf("target %s: %w", t.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errsOut...)
}

// checkParallel is how many targets the serving check asks at once.
const checkParallel = 8

// reconcile compares what the target listed with the deployments on it
// that something calls.
func (s *Service) reconcile(ctx context.Context, t db.ServingTarget, served []serving.Served) error {
	rows, err := db.New(s.Pool).DeploymentListInUseOnTarget(ctx, db.DeploymentListInUseOnTargetParams{OrgID: t.OrgID, TargetID: uuid.NullUUID{UUID: t.ID, Valid: true}})
	if err != nil {
		return err
	}
	missing := map[uuid.UUID]bool{}
	var out []error
	for _, r := range rows {
		d := r.Deployment
		if listedIn(served, t, d.ServedName) {
			continue
		}
		missing[d.VersionID] = true
		if err := s.missing(ctx, t, r); err != nil {
			out = append(out, err)
		}
	}
	// A version whose deployments here are all listed again has its alert
	// settled.
	for _, r := range rows {
		if missing[r.Deployment.VersionID] || s.Alerts == nil {
			continue
		}
		missing[r.Deployment.VersionID] = true // settled once
		if err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, _ *db.Queries) error {
			return s.Alerts.SettleTx(ctx, tx, t.OrgID, servingAlertKey(r.Deployment.VersionID))
		}); err != nil {
			out = append(out, err)
		}
	}
	return errors.Join(out...)
}

func listedIn(served []serving.Served, t db.ServingTarget, name string) bool {
	if t.Kind == serving.KindVLLMPooling {
		_, ok := serving.Serves(served, name)
		return ok
	}
	ok, _ := serving.Lists(served, name, "")
	return ok
}

// missing handles one deployment something calls that its target did not
// list: it is recorded as no longer served, the version's alert opens, and
// a reload starts unless one is under way or failed a short while ago.
func (s *Service) missing(ctx context.Context, t db.ServingTarget, r db.DeploymentListInUseOnTargetRow) error {
	d := r.Deployment
	if d.UnloadedAt == nil {
		if err := s.markGone(ctx, d, t, r.Version); err != nil {
			return err
		}
	}
	why := fmt.Sprintf("%s stopped listing %s (%s %s) at the serving check of %s", t.Name, d.ServedName, r.ModelName, r.Version,
		time.Now().UTC().Format("2006-01-02 15:04:05 UTC"))
	if s.Alerts != nil {
		err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, _ *db.Queries) error {
			return s.Alerts.RaiseTx(ctx, tx, d.OrgID, alerts.Condition{Kind: KindServingMissing, Severity: alerts.SeverityBad,
				Key:   servingAlertKey(d.VersionID),
				Title: fmt.Sprintf("%s %s is not served by %s.", r.ModelName, r.Version, t.Name),
				Message: fmt.Sprintf("%s no longer lists the adapter %s, which %s. Curate is loading it again.", t.Name, d.ServedName,
					callers(r)),
				Details: map[string]any{"version_id": d.VersionID, "target": t.Name, "adapter": d.ServedName, "deployment_id": d.ID,
					"evidence": "/models/versions/" + d.VersionID.String()}})
		})
		if err != nil {
			return err
		}
	}
	if r.Reloading {
		return nil
	}
	return s.reload(ctx, t, r, "Reloaded: "+why+".")
}

func callers(r db.DeploymentListInUseOnTargetRow) string {
	switch {
	case r.AliasCurrent && r.ExperimentKey != "":
		return fmt.Sprintf("the alias %q and the experiment %s call", r.Deployment.Alias, r.ExperimentKey)
	case r.AliasCurrent:
		return fmt.Sprintf("the alias %q calls", r.Deployment.Alias)
	}
	return fmt.Sprintf("the experiment %s calls", r.ExperimentKey)
}

// reload starts a deployment of the version on the same target that puts
// back what d loaded: for the alias d put it under when d is that alias's
// current deployment, else as a load for the experiment whose arm calls
// it. A deployment of the alias already under way is left to carry on;
// when the version is served on the target under another deployment, the
// arms are called there at once.
func (s *Service) reload(ctx context.Context, t db.ServingTarget, r db.DeploymentListInUseOnTargetRow, reason string) error {
	d := r.Deployment
	action, alias := actionReload, d.Alias
	if !r.AliasCurrent {
		action, alias = actionLoad, r.ExperimentKey
	}
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		nd, unchanged, err := s.startDeployment(ctx, tx, q, watcher, d.OrgID, d.VersionID, t, alias, action, reason,
			uuid.NullUUID{UUID: d.ID, Valid: true})
		var conflict *errs.Conflict
		if errors.As(err, &conflict) {
			// Someone deploys the alias now: that deployment serves it.
			return nil
		}
		if err != nil {
			return err
		}
		if unchanged && nd.Status == db.DeploymentStatusSucceeded && nd.UnloadedAt == nil {
			return q.ExperimentArmUpdateReloaded(ctx, db.ExperimentArmUpdateReloadedParams{OrgID: d.OrgID, DeploymentID: uuid.NullUUID{UUID: d.ID, Valid: true},
				ReloadID: uuid.NullUUID{UUID: nd.ID, Valid: true}})
		}
		return nil
	})
}

// reloaded calls the arms that were called at what a reload put back at
// the reload, in the caller's transaction, once the reload succeeded.
func reloaded(ctx context.Context, q *db.Queries, d db.Deployment) error {
	if !d.ReloadOf.Valid {
		return nil
	}
	return q.ExperimentArmUpdateReloaded(ctx, db.ExperimentArmUpdateReloadedParams{OrgID: d.OrgID, DeploymentID: d.ReloadOf,
		ReloadID: uuid.NullUUID{UUID: d.ID, Valid: true}})
}

// SetFallback sets what resolving an alias answers while its target does
// not list its version.
func (s *Service) SetFallback(ctx context.Context, actor audit.Actor, orgID uuid.UUID, name, alias, fallback string) error {
	v := &errs.Invalid{}
	v.Text("name", name, 64, true)
	v.Text("alias", alias, 64, true)
	if fallback != FallbackNone && fallback != FallbackLastHealthy {
		v.Add("fallback", "must be %s or %s", FallbackNone, FallbackLastHealthy)
	}
	if err := v.Err(); err != nil {
		return err
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		m, err := q.RegisteredModelGetByName(ctx, db.RegisteredModelGetByNameParams{OrgID: orgID, Name: name})
		if err != nil {
			return errs.NotFound(err)
		}
		n, err := q.ModelAliasUpdateFallback(ctx, db.ModelAliasUpdateFallbackParams{OrgID: orgID, RegisteredModelID: m.ID, Alias: alias, Fallback: fallback})
		if err != nil {
			return err
		}
		if n == 0 {
			return errs.InvalidField("alias", "%s has no alias %q", name, alias)
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "model.alias_fallback", TargetType: "registered_model",
			TargetID: m.ID.String(), Details: map[string]any{"name": name, "alias": alias, "fallback": fallback}})
	})
}

// servedNow says why a deployment's model cannot be answered by resolving
// now ("" when it can): its target is asked what it serves, and it must
// have listed the model at a check no older than the poll interval.
func (s *Service) servedNow(ctx context.Context, d db.Deployment, t db.ServingTarget) (string, error) {
	if !serving.Polled(t.Kind) || d.ServedName == "" {
		return "", nil
	}
	if d.UnloadedAt != nil {
		return fmt.Sprintf("the serving target %s no longer lists the adapter %s", t.Name, d.ServedName), nil
	}
	c, ok, err := s.Serving.LastCheck(ctx, d.OrgID, t.ID)
	if err != nil {
		return "", err
	}
	age := time.Since(c.CheckedAt)
	switch {
	case !ok:
		return fmt.Sprintf("the serving target %s has not been asked what it serves yet, so the adapter %s is not known to be served", t.Name, d.ServedName), nil
	case age > s.poll():
		return fmt.Sprintf("the serving target %s was last asked what it serves %s ago (more than the %s interval), so the adapter %s is not known to be served",
			t.Name, age.Round(time.Second), s.poll(), d.ServedName), nil
	case !c.Healthy:
		return fmt.Sprintf("the serving target %s could not be asked what it serves at its last check (%s), so the adapter %s is not known to be served",
			t.Name, c.Error, d.ServedName), nil
	case !c.Lists(d.ServedName):
		return fmt.Sprintf("the serving target %s did not list the adapter %s at its last check", t.Name, d.ServedName), nil
	}
	return "", nil
}

// fallback finds the alias's newest earlier deployment that resolving can
// answer now.
func (s *Service) fallback(ctx context.Context, q *db.Queries, orgID, modelID uuid.UUID, alias string, current uuid.UUID) (Resolved, bool, error) {
	rows, err := q.DeploymentListSucceededForAlias(ctx, db.DeploymentListSucceededForAliasParams{OrgID: orgID, RegisteredModelID: modelID, Alias: alias})
	if err != nil {
		return Resolved{}, false, err
	}
	for _, r := range rows {
		if r.Deployment.ID == current {
			continue
		}
		why, err := s.servedNow(ctx, r.Deployment, r.ServingTarget)
		if err != nil {
			return Resolved{}, false, err
		}
		if why != "" {
			continue
		}
		v, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: r.Deployment.VersionID})
		if err != nil {
			return Resolved{}, false, err
		}
		return Resolved{Name: v.RegisteredModel.Name, Version: r.Version, ModelID: v.ModelVersion.ModelID,
			Model: cmp.Or(r.Deployment.ServedName, v.ModelVersion.ModelID), BaseURL: r.ServingTarget.BaseUrl, Target: r.ServingTarget.Name,
			Fallback: true}, true, nil
	}
	return Resolved{}, false, nil
}

// TargetHealth is a serving target as its last check found it.
type TargetHealth struct {
	Target string
	// Polled: the target is asked what it serves; targets of other kinds
	// serve what they were given, as far as Curate can tell.
	Polled bool
	// Checked is when it was last asked; nil: never.
	Checked *time.Time
	Healthy bool
	Error   string
	Models  []string
	// Stale: the last check is older than the poll interval.
	Stale bool
}

// Health reports the named targets of the organisation, in the order
// given, each once; names that are no target are left out.
func (s *Service) Health(ctx context.Context, orgID uuid.UUID, names []string) ([]TargetHealth, error) {
	if len(names) == 0 {
		return nil, nil
	}
	targets, err := db.New(s.Pool).ServingTargetList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	checks, err := s.Serving.Checks(ctx, orgID)
	if err != nil {
		return nil, err
	}
	byName := map[string]db.ServingTarget{}
	for _, t := range targets {
		byName[t.Name] = t
	}
	var out []TargetHealth
	seen := map[string]bool{}
	for _, n := range names {
		t, ok := byName[n]
		if !ok || seen[n] {
			continue
		}
		seen[n] = true
		h := TargetHealth{Target: t.Name, Polled: serving.Polled(t.Kind)}
		if c, ok := checks[t.ID]; ok && h.Polled {
			at := c.CheckedAt
			h.Checked, h.Healthy, h.Error, h.Models, h.Stale = &at, c.Healthy, c.Error, c.Models, time.Since(at) > s.poll()
		}
		out = append(out, h)
	}
	return out, nil
}
