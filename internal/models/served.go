package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/serving"
)

// What a version serves on a target is read from the records kept in step
// with the target: a deployment serves its version from the moment it
// succeeds (the target listed it) until it is recorded unloaded, before
// its adapter is unloaded or once the target is found not listing it.
// Nothing unloads a deployment an alias or a running or paused
// experiment still calls.

const (
	// loadWait bounds a load carried out while an experiment starts.
	loadWait = time.Minute
	// loadFallback is when a load's job runs, should the process that
	// started the experiment stop before the load finished: after the
	// load's own wait, and within 90 s of that process's death.
	loadFallback = loadWait + 15*time.Second
)

// checkedBy signs the history entry of a deployment found no longer
// served by its target.
const checkedBy = "serving check"

// ChatTarget is where a version answers chat completions: the newest
// target serving it that Curate can call, and the name it is served under
// there (a provider serves a version under its model id).
type ChatTarget struct {
	BaseURL, APIKey, Model string
}

// ErrNotServed is a version with no deployment Curate can send prompts to.
var ErrNotServed = errors.New("the version is not deployed on a serving target Curate can call")

// Chat finds where a version of the organisation answers.
func (s *Service) Chat(ctx context.Context, orgID, versionID uuid.UUID) (ChatTarget, error) {
	return s.ChatOn(ctx, orgID, versionID, "")
}

// ChatOn finds where a version of the organisation answers on the serving
// target named target; on any target when target is empty.
func (s *Service) ChatOn(ctx context.Context, orgID, versionID uuid.UUID, target string) (ChatTarget, error) {
	q := db.New(s.Pool)
	v, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return ChatTarget{}, errs.NotFound(err)
	}
	rows, err := q.DeploymentListServed(ctx, db.DeploymentListServedParams{OrgID: orgID, VersionID: versionID})
	if err != nil {
		return ChatTarget{}, err
	}
	for _, r := range rows {
		if target != "" && r.ServingTarget.Name != target {
			continue
		}
		model := r.Deployment.ServedName
		if r.ServingTarget.Kind == serving.KindOpenAI {
			model = v.ModelVersion.ModelID
		}
		if model == "" {
			continue
		}
		base, key, ok, err := s.Serving.Chat(r.ServingTarget)
		if err != nil {
			return ChatTarget{}, err
		}
		if ok {
			return ChatTarget{BaseURL: base, APIKey: key, Model: model}, nil
		}
	}
	return ChatTarget{}, ErrNotServed
}

// Served is where and under which name a version answers, for a client
// that calls it.
type Served struct {
	Version string `json:"version"`
	Model   string `json:"model"`
	BaseURL string `json:"base_url"`
	Target  string `json:"target"`
}

// Served finds where a version of the organisation is served now: the
// newest deployment still serving it. A version served nowhere answers its
// model id and no address.
func (s *Service) Served(ctx context.Context, orgID, versionID uuid.UUID) (Served, error) {
	q := db.New(s.Pool)
	v, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return Served{}, errs.NotFound(err)
	}
	out := Served{Version: v.ModelVersion.Version, Model: v.ModelVersion.ModelID}
	rows, err := q.DeploymentListServed(ctx, db.DeploymentListServedParams{OrgID: orgID, VersionID: versionID})
	if err != nil || len(rows) == 0 {
		return out, err
	}
	d, t := rows[0].Deployment, rows[0].ServingTarget
	out.Model = cmp.Or(d.ServedName, out.Model)
	out.BaseURL, out.Target = t.BaseUrl, t.Name
	return out, nil
}

// Where is where a version answers for an experiment's arm.
type Where struct {
	// Deployment serves the version; uuid.Nil for a provider's model
	// served nowhere Curate knows, which is called by its model id.
	Deployment uuid.UUID
	Target     string
	TargetID   uuid.UUID
	// Model is what a caller sends as "model".
	Model string
	// Loaded: the version was loaded there just now.
	Loaded bool
}

func whereOf(d db.Deployment, t db.ServingTarget, modelID string) Where {
	return Where{Deployment: d.ID, Target: t.Name, TargetID: t.ID, Model: cmp.Or(d.ServedName, modelID)}
}

// NotServed says, in words fit for a page, why a version cannot be served
// where it is wanted.
type NotServed struct{ Reason string }

func (e *NotServed) Error() string { return e.Reason }

// Confirm finds a deployment serving the version whose target, asked
// (GET /v1/models on vLLM), still lists it: prefer first, when it is one,
// then the newest. A deployment its target no longer lists is recorded as
// not served. ok is false when none is; a target that could not be asked
// is a NotServed error.
func (s *Service) Confirm(ctx context.Context, orgID, versionID, prefer uuid.UUID) (w Where, ok bool, err error) {
	q := db.New(s.Pool)
	v, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return Where{}, false, errs.NotFound(err)
	}
	rows, err := q.DeploymentListServed(ctx, db.DeploymentListServedParams{OrgID: orgID, VersionID: versionID})
	if err != nil {
		return Where{}, false, err
	}
	slices.SortStableFunc(rows, func(a, b db.DeploymentListServedRow) int {
		return cmp.Compare(b2i(b.Deployment.ID == prefer), b2i(a.Deployment.ID == prefer))
	})
	var unreachable error
	for _, r := range rows {
		listed, err := s.listed(ctx, r.Deployment, r.ServingTarget)
		if err != nil {
			unreachable = &NotServed{Reason: fmt.Sprintf("%s could not be asked what it serves: %s", r.ServingTarget.Name, describe(err))}
			continue
		}
		if listed {
			return whereOf(r.Deployment, r.ServingTarget, v.ModelVersion.ModelID), true, nil
		}
		if err := s.markGone(ctx, r.Deployment, r.ServingTarget, v.ModelVersion.Version); err != nil {
			return Where{}, false, err
		}
	}
	return Where{}, false, unreachable
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// LoadFor loads a version served nowhere on the target it will be called
// at: near (where the experiment's other arm is served) when it can take
// the version, else where the version was last deployed, else where its
// model's production alias is. The load is a deployment of its own, in the
// history under alias (the experiment's key) with the reason, carried out
// here and now; it moves no alias. A provider's model with no such target
// is called by its id, and nothing is loaded. What cannot be loaded is a
// NotServed error saying why.
func (s *Service) LoadFor(ctx context.Context, actor audit.Actor, orgID, versionID, near uuid.UUID, alias, reason string) (Where, error) {
	q := db.New(s.Pool)
	v, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return Where{}, errs.NotFound(err)
	}
	ver, m := v.ModelVersion, v.RegisteredModel
	candidates := []uuid.UUID{}
	if near != uuid.Nil {
		candidates = append(candidates, near)
	}
	home, err := q.DeploymentGetHomeTarget(ctx, db.DeploymentGetHomeTargetParams{OrgID: orgID, RegisteredModelID: m.ID, VersionID: ver.ID})
	if err == nil {
		candidates = append(candidates, home)
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return Where{}, err
	}
	var target db.ServingTarget
	for _, id := range candidates {
		t, err := s.Serving.Get(ctx, orgID, id)
		if err != nil {
			return Where{}, err
		}
		if Takes(t.Kind, ver.Kind) {
			target = t
			break
		}
	}
	if target.ID == uuid.Nil {
		if ver.Kind == KindFull {
			return Where{Model: ver.ModelID}, nil
		}
		return Where{}, &NotServed{Reason: fmt.Sprintf("no serving target that loads LoRA adapters serves %s: deploy the version first", m.Name)}
	}
	var d db.Deployment
	err = db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		var err error
		d, _, err = s.startDeployment(ctx, tx, q, actor, orgID, ver.ID, target, alias, actionLoad, reason, uuid.NullUUID{})
		return err
	})
	var (
		conflict *errs.Conflict
		invalid  *errs.Invalid
	)
	switch {
	case errors.As(err, &conflict):
		return Where{}, &NotServed{Reason: conflict.Message}
	case errors.As(err, &invalid):
		return Where{}, &NotServed{Reason: invalid.Errors[0].Message}
	case err != nil:
		return Where{}, err
	}
	loaded := false
	if d.Status != db.DeploymentStatusSucceeded {
		run, cancel := context.WithTimeout(ctx, loadWait)
		err := s.Advance(run, d.ID)
		cancel()
		if err != nil {
			if ferr := s.Fail(context.WithoutCancel(ctx), d.ID, err); ferr != nil {
				return Where{}, ferr
			}
			return Where{}, &NotServed{Reason: fmt.Sprintf("loading it on %s failed: %s", target.Name, describe(err))}
		}
		loaded = true
	}
	if d, err = q.DeploymentGetByID(ctx, d.ID); err != nil {
		return Where{}, err
	}
	if d.Status != db.DeploymentStatusSucceeded || d.UnloadedAt != nil {
		return Where{}, &NotServed{Reason: fmt.Sprintf("its load on %s did not finish", target.Name)}
	}
	w := whereOf(d, target, ver.ModelID)
	w.Loaded = loaded
	return w, nil
}

// HoldTx locks a deployment's row in the caller's transaction and reports
// whether it still serves its version. An unload takes the same lock
// before checking what uses the deployment, so what the caller records as
// using it before committing keeps it loaded.
func (s *Service) HoldTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (bool, error) {
	d, err := db.New(tx).DeploymentGetForUpdate(ctx, id)
	if err != nil {
		return false, err
	}
	return d.Status == db.DeploymentStatusSucceeded && d.UnloadedAt == nil, nil
}

// ReleaseTx queues, in the caller's transaction, the unloading of
// deployments an experiment no longer calls, after each target's grace
// period; each is unloaded then unless something uses it still.
func (s *Service) ReleaseTx(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error {
	q := db.New(tx)
	for _, id := range ids {
		d, err := q.DeploymentGetByID(ctx, id)
		if err != nil {
			return err
		}
		if d.ServedName == "" || !d.TargetID.Valid || d.UnloadedAt != nil {
			continue
		}
		t, err := s.Serving.GetTx(ctx, tx, d.OrgID, d.TargetID.UUID)
		if err != nil {
			return err
		}
		grace := time.Duration(t.UnloadGraceS) * time.Second
		if _, err := s.Jobs.InsertTx(ctx, tx, UnloadArgs{DeploymentID: id}, &river.InsertOpts{ScheduledAt: time.Now().Add(grace)}); err != nil {
			return err
		}
	}
	return nil
}

// listed asks a vLLM target whether it lists what the deployment loaded
// (or, on a pooling target, the model it was found serving); other
// targets serve what they were given, as far as Curate can tell.
func (s *Service) listed(ctx context.Context, d db.Deployment, t db.ServingTarget) (bool, error) {
	if (t.Kind != serving.KindVLLM && t.Kind != serving.KindVLLMPooling) || d.ServedName == "" {
		return true, nil
	}
	served, err := s.Serving.Models(ctx, t)
	if err != nil {
		return false, err
	}
	if t.Kind == serving.KindVLLMPooling {
		_, ok := serving.Serves(served, d.ServedName)
		return ok, nil
	}
	ok, _ := serving.Lists(served, d.ServedName, "")
	return ok, nil
}

// markGone records that a target no longer lists what a deployment loaded.
func (s *Service) markGone(ctx context.Context, d db.Deployment, t db.ServingTarget, version string) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if _, err := q.DeploymentGetForUpdate(ctx, d.ID); err != nil {
			return err
		}
		if n, err := q.DeploymentUpdateUnloaded(ctx, d.ID); err != nil || n == 0 {
			return err
		}
		return q.ModelHistoryInsert(ctx, db.ModelHistoryInsertParams{
			OrgID: d.OrgID, RegisteredModelID: d.RegisteredModelID, ActorLabel: checkedBy, Action: "unloaded",
			Alias: d.Alias, ToVersion: version, Target: t.Name, Reason: d.Reason,
			Result: fmt.Sprintf("%s is no longer listed by %s", d.ServedName, t.Name), DeploymentID: uuid.NullUUID{UUID: d.ID, Valid: true},
		})
	})
}
