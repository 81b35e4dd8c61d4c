package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/serving"
)

// DeployArgs asks a worker to carry a deployment out.
type DeployArgs struct {
	DeploymentID uuid.UUID `json:"deployment_id"`
}

// Kind names the job in River's table.
func (DeployArgs) Kind() string { return "model_deploy" }

// UnloadArgs asks a worker to unload what a deployment loaded, once the
// alias has moved away from it and its grace period is over.
type UnloadArgs struct {
	DeploymentID uuid.UUID `json:"deployment_id"`
}

// Kind names the job in River's table.
func (UnloadArgs) Kind() string { return "model_unload" }

// deployAttempts is how many times a deployment's job runs before the
// deployment fails with the last error.
const deployAttempts = 3

// Actions a deployment carries out: put a version under an alias, put
// back the one before, or load a version on a target for an experiment's
// arm without moving any alias (its alias names the experiment).
const (
	actionDeploy   = "deploy"
	actionRollback = "rollback"
	actionLoad     = "load"
)

// MaxReason bounds the reason typed for a deployment.
const MaxReason = 2000

// DeployRequest is what an admin asks for: put a version under an alias on
// a target, saying why.
type DeployRequest struct {
	Alias  string `json:"alias"`
	Target string `json:"target"`
	Reason string `json:"reason"`
}

// RollbackRequest puts back the version that held an alias before.
type RollbackRequest struct {
	Alias  string `json:"alias"`
	Reason string `json:"reason"`
}

// Deployment is a deployment as pages and the API show it.
type Deployment struct {
	ID              uuid.UUID  `json:"id"`
	VersionID       uuid.UUID  `json:"version_id"`
	Alias           string     `json:"alias"`
	Target          string     `json:"target"`
	Action          string     `json:"action"`
	Status          string     `json:"status"`
	Reason          string     `json:"reason"`
	Error           string     `json:"error"`
	ServedName      string     `json:"served_name"`
	PreviousVersion *uuid.UUID `json:"previous_version_id"`
	LoadedAt        *time.Time `json:"loaded_at"`
	VerifiedAt      *time.Time `json:"verified_at"`
	AliasMovedAt    *time.Time `json:"alias_moved_at"`
	// UnloadedAt is when the target stopped serving what this deployment
	// put there.
	UnloadedAt *time.Time `json:"unloaded_at"`
	// ReloadOf is the deployment this one put back after its target
	// stopped listing it.
	ReloadOf   *uuid.UUID `json:"reload_of,omitempty"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Unchanged: the request asked for what was already done or under
	// way, and this is that deployment; nothing new was started.
	Unchanged bool `json:"-"`
}

func deploymentOf(d db.Deployment, target string) Deployment {
	out := Deployment{
		ID: d.ID, VersionID: d.VersionID, Alias: d.Alias, Target: target, Action: d.Action, Status: string(d.Status),
		Reason: d.Reason, Error: d.Error, ServedName: d.ServedName, LoadedAt: d.LoadedAt, VerifiedAt: d.VerifiedAt,
		AliasMovedAt: d.AliasMovedAt, UnloadedAt: d.UnloadedAt, CreatedBy: d.CreatedByLabel, CreatedAt: d.CreatedAt, FinishedAt: d.FinishedAt,
	}
	if d.PreviousVersionID.Valid {
		out.PreviousVersion = &d.PreviousVersionID.UUID
	}
	if d.ReloadOf.Valid {
		out.ReloadOf = &d.ReloadOf.UUID
	}
	return out
}

// Deploy asks for a version to be put under an alias on a target. The
// deployment and its job are stored together; a worker loads the version,
// checks the target serves it, and only then moves the alias. A second
// deployment of the same alias while one is under way is a conflict,
// unless it asks for the same version on the same target: then, as when
// the alias already holds the version there, it answers the existing
// deployment (Unchanged) and loads nothing.
func (s *Service) Deploy(ctx context.Context, actor audit.Actor, orgID, versionID uuid.UUID, in DeployRequest) (Deployment, error) {
	v := &errs.Invalid{}
	checkAlias(v, in.Alias)
	if in.Target == "" {
		var err error
		if in.Target, err = s.onlyTarget(ctx, orgID, versionID); err != nil {
			return Deployment{}, err
		}
	}
	v.Text("target", in.Target, 64, true)
	v.Text("reason", in.Reason, MaxReason, true)
	if err := v.Err(); err != nil {
		return Deployment{}, err
	}
	if err := s.checkGate(ctx, orgID, versionID, in.Alias); err != nil {
		return Deployment{}, err
	}
	if err := s.recheck(ctx, orgID, versionID, in.Alias, in.Target); err != nil {
		return Deployment{}, err
	}
	var out Deployment
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		t, err := s.Serving.GetByNameTx(ctx, tx, orgID, in.Target)
		if err != nil {
			return err
		}
		d, unchanged, err := s.startDeployment(ctx, tx, q, actor, orgID, versionID, t, in.Alias, actionDeploy, in.Reason, uuid.NullUUID{})
		out = deploymentOf(d, t.Name)
		out.Unchanged = unchanged
		return err
	})
	return out, err
}

// onlyTarget is the name of the one serving target that can take the
// version, for a deployment that names none; a version that several could
// take, or none, is refused on "target" with their names.
func (s *Service) onlyTarget(ctx context.Context, orgID, versionID uuid.UUID) (string, error) {
	targets, err := s.TargetsFor(ctx, orgID, versionID)
	if err != nil {
		return "", err
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	switch len(targets) {
	case 1:
		return targets[0].Name, nil
	case 0:
		return "", errs.InvalidField("target", "no serving target of this organisation can take this version: add one, then name it")
	}
	return "", errs.InvalidField("target", "several serving targets can take this version (%s): name one", strings.Join(names, ", "))
}

// recheck asks the target whether it still lists what the alias's current
// deployment of the version put there, before a re-deploy of that version
// is answered with it: a target that lost the adapter (restarted, say) is
// recorded as no longer serving it, and the re-deploy loads it again. A
// target that cannot be asked leaves the record as it is.
func (s *Service) recheck(ctx context.Context, orgID, versionID uuid.UUID, alias, target string) error {
	q := db.New(s.Pool)
	ver, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return errs.NotFound(err)
	}
	cur, err := q.DeploymentGetLatestSucceeded(ctx, db.DeploymentGetLatestSucceededParams{
		OrgID: orgID, RegisteredModelID: ver.RegisteredModel.ID, Alias: alias})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.VersionID != versionID || cur.UnloadedAt != nil || !cur.TargetID.Valid {
		return nil
	}
	t, err := s.Serving.Get(ctx, orgID, cur.TargetID.UUID)
	if err != nil || t.Name != target {
		return err
	}
	if listed, err := s.listed(ctx, cur, t); err == nil && !listed {
		return s.markGone(ctx, cur, t, ver.ModelVersion.Version)
	}
	return nil
}

// Rollback deploys, on the same target, the version that held the alias
// before its current one, as the history recorded it.
func (s *Service) Rollback(ctx context.Context, actor audit.Actor, orgID, versionID uuid.UUID, in RollbackRequest) (Deployment, error) {
	v := &errs.Invalid{}
	checkAlias(v, in.Alias)
	v.Text("reason", in.Reason, MaxReason, true)
	if err := v.Err(); err != nil {
		return Deployment{}, err
	}
	var out Deployment
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		cur, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: versionID})
		if err != nil {
			return errs.NotFound(err)
		}
		last, err := q.DeploymentGetLatestSucceeded(ctx, db.DeploymentGetLatestSucceededParams{
			OrgID: orgID, RegisteredModelID: cur.RegisteredModel.ID, Alias: in.Alias})
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.InvalidField("alias", "%s has never been deployed under %q: there is nothing to roll back", cur.RegisteredModel.Name, in.Alias)
		}
		if err != nil {
			return err
		}
		if !last.PreviousVersionID.Valid {
			return errs.InvalidField("alias", "no version held %q before the current one: there is nothing to roll back to", in.Alias)
		}
		if !last.TargetID.Valid {
			return errs.InvalidField("alias", "the current deployment of %q names no serving target", in.Alias)
		}
		t, err := s.Serving.GetTx(ctx, tx, orgID, last.TargetID.UUID)
		if err != nil {
			return err
		}
		d, unchanged, err := s.startDeployment(ctx, tx, q, actor, orgID, last.PreviousVersionID.UUID, t, in.Alias, actionRollback, in.Reason, uuid.NullUUID{})
		out = deploymentOf(d, t.Name)
		out.Unchanged = unchanged
		return err
	})
	return out, err
}

func checkAlias(v *errs.Invalid, alias string) {
	if alias == "" {
		v.Add("alias", "is required")
	} else if !name.MatchString(alias) {
		v.Add("alias", "%s", NameRule)
	}
}

// startDeployment checks the version can go to the target, stores the
// deployment and inserts its job, in the caller's transaction; reloadOf
// names the deployment a reload puts back. The version
// and its registered model are locked first, so deployments of one model
// are decided one at a time: one asking for what is already done or under
// way answers that deployment (unchanged true) and starts nothing.
func (s *Service) startDeployment(ctx context.Context, tx pgx.Tx, q *db.Queries, actor audit.Actor, orgID, versionID uuid.UUID,
	t db.ServingTarget, alias, action, reason string, reloadOf uuid.NullUUID) (db.Deployment, bool, error) {
	ver, err := q.ModelVersionGetForUpdate(ctx, db.ModelVersionGetForUpdateParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return db.Deployment{}, false, errs.NotFound(err)
	}
	m, err := q.RegisteredModelGetForUpdate(ctx, db.RegisteredModelGetForUpdateParams{OrgID: orgID, ID: ver.RegisteredModelID})
	if err != nil {
		return db.Deployment{}, false, err
	}
	if ver.Status == db.ModelVersionStatusArchived {
		return db.Deployment{}, false, &errs.Conflict{Message: fmt.Sprintf("%s %s is archived; archived versions are not deployed.", m.Name, ver.Version)}
	}
	if err := refuseTarget(t.Name, t.Kind, m.Name, ver.Version, ver.Kind); err != nil {
		return db.Deployment{}, false, err
	}
	prev := uuid.NullUUID{}
	if action == actionLoad {
		if d, ok, err := servedOn(ctx, q, orgID, ver.ID, t.ID); err != nil || ok {
			return d, ok, err
		}
	} else {
		if a, err := q.ModelAliasGet(ctx, db.ModelAliasGetParams{OrgID: orgID, RegisteredModelID: m.ID, Alias: alias}); err == nil {
			prev = uuid.NullUUID{UUID: a.VersionID, Valid: true}
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return db.Deployment{}, false, err
		}
		if d, ok, err := holds(ctx, q, orgID, m.ID, ver.ID, t.ID, alias, prev); err != nil || ok {
			return d, ok, err
		}
	}
	id := uuid.New()
	served := ""
	switch t.Kind {
	case serving.KindVLLM:
		// A name of its own per load, never reused for another load:
		// reloading an adapter under a name vLLM has seen can serve the
		// old weights. A version the target serves already (an
		// experiment's arm going to production) keeps the adapter loaded
		// and its name: one version, one copy.
		served = fmt.Sprintf("%s-%s-%s", m.Name, ver.Version, id.String()[:8])
		if action != actionLoad {
			live, ok, err := liveOn(ctx, q, orgID, ver.ID, t.ID)
			if err != nil {
				return db.Deployment{}, false, err
			}
			if ok {
				served = live.ServedName
			}
		}
	case serving.KindVLLMPooling:
		// The server serves the model it was started with, under its
		// model id unless it was given another name (found when asked).
		served = ver.ModelID
	}
	d, err := q.DeploymentInsert(ctx, db.DeploymentInsertParams{
		OrgID: orgID, RegisteredModelID: m.ID, VersionID: ver.ID, TargetID: uuid.NullUUID{UUID: t.ID, Valid: true},
		Alias: alias, Action: action, Reason: reason, PreviousVersionID: prev, ServedName: served,
		CreatedBy: uuid.NullUUID{UUID: actor.ID, Valid: actor.Kind == "user" && actor.ID != uuid.Nil}, CreatedByLabel: actor.Label,
		ReloadOf: reloadOf,
	})
	if errs.IsUnique(err, "deployments_one_active_per_alias", "deployments_one_active_load") {
		return db.Deployment{}, false, &errs.Conflict{Message: fmt.Sprintf("%s is already being deployed under %q; wait for that deployment to finish.", m.Name, alias)}
	}
	if err != nil {
		return db.Deployment{}, false, err
	}
	// A few attempts: each already retries the target with backoff, and a
	// deployment waited on by a person should fail visibly, not linger.
	opts := &river.InsertOpts{MaxAttempts: deployAttempts}
	if action == actionLoad && !reloadOf.Valid {
		// The experiment starting carries a load out itself; the job is
		// there should its process stop first. A reload is the job's.
		opts.ScheduledAt = time.Now().Add(loadFallback)
	}
	job, err := s.Jobs.InsertTx(ctx, tx, DeployArgs{DeploymentID: d.ID}, opts)
	if err != nil {
		return db.Deployment{}, false, err
	}
	if err := q.DeploymentUpdateRiverID(ctx, db.DeploymentUpdateRiverIDParams{ID: d.ID, RiverJobID: pgtype.Int8{Int64: job.Job.ID, Valid: true}}); err != nil {
		return db.Deployment{}, false, err
	}
	return d, false, audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "model." + action, TargetType: "model_version",
		TargetID: ver.ID.String(), Details: map[string]any{"name": m.Name, "version": ver.Version, "alias": alias, "target": t.Name, "reason": reason}})
}

// holds finds the deployment that already does what an alias's deployment
// asks for: one under way for the same version and target, or the one
// that put the version under the alias on that target, still served.
func holds(ctx context.Context, q *db.Queries, orgID, modelID, versionID, targetID uuid.UUID, alias string, current uuid.NullUUID) (db.Deployment, bool, error) {
	d, err := q.DeploymentGetActiveForAlias(ctx, db.DeploymentGetActiveForAliasParams{RegisteredModelID: modelID, Alias: alias})
	if err == nil {
		// Another version, or another target: the insert that follows
		// is refused as a deployment already under way.
		return d, d.VersionID == versionID && d.TargetID.UUID == targetID, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return db.Deployment{}, false, err
	}
	if !current.Valid || current.UUID != versionID {
		return db.Deployment{}, false, nil
	}
	d, err = q.DeploymentGetLatestSucceeded(ctx, db.DeploymentGetLatestSucceededParams{OrgID: orgID, RegisteredModelID: modelID, Alias: alias})
	if errors.Is(err, pgx.ErrNoRows) {
		return db.Deployment{}, false, nil
	}
	if err != nil {
		return db.Deployment{}, false, err
	}
	return d, d.VersionID == versionID && d.TargetID.UUID == targetID && d.UnloadedAt == nil, nil
}

// servedOn finds a deployment that serves the version on the target or is
// loading it there.
func servedOn(ctx context.Context, q *db.Queries, orgID, versionID, targetID uuid.UUID) (db.Deployment, bool, error) {
	d, err := q.DeploymentGetActiveLoad(ctx, db.DeploymentGetActiveLoadParams{VersionID: versionID, TargetID: uuid.NullUUID{UUID: targetID, Valid: true}})
	if err == nil {
		return d, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return db.Deployment{}, false, err
	}
	rows, err := q.DeploymentListServed(ctx, db.DeploymentListServedParams{OrgID: orgID, VersionID: versionID})
	if err != nil {
		return db.Deployment{}, false, err
	}
	for _, r := range rows {
		if r.Deployment.TargetID.UUID == targetID {
			return r.Deployment, true, nil
		}
	}
	return db.Deployment{}, false, nil
}

// liveOn finds the deployment that serves the version on the target now
// under a name of its own (succeeded, not unloaded since), if any.
func liveOn(ctx context.Context, q *db.Queries, orgID, versionID, targetID uuid.UUID) (db.Deployment, bool, error) {
	rows, err := q.DeploymentListServed(ctx, db.DeploymentListServedParams{OrgID: orgID, VersionID: versionID})
	if err != nil {
		return db.Deployment{}, false, err
	}
	for _, r := range rows {
		if r.Deployment.TargetID.UUID == targetID && r.Deployment.ServedName != "" {
			return r.Deployment, true, nil
		}
	}
	return db.Deployment{}, false, nil
}

// GetDeployment returns one of the organisation's deployments.
func (s *Service) GetDeployment(ctx context.Context, orgID, id uuid.UUID) (Deployment, error) {
	q := db.New(s.Pool)
	d, err := q.DeploymentGet(ctx, db.DeploymentGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Deployment{}, errs.NotFound(err)
	}
	target := ""
	if d.TargetID.Valid {
		t, err := s.Serving.Get(ctx, orgID, d.TargetID.UUID)
		if err != nil {
			return Deployment{}, err
		}
		target = t.Name
	}
	return deploymentOf(d, target), nil
}

// Deployments lists a version's deployments, newest first.
func (s *Service) Deployments(ctx context.Context, orgID, versionID uuid.UUID) ([]Deployment, error) {
	rows, err := db.New(s.Pool).DeploymentListByVersion(ctx, db.DeploymentListByVersionParams{OrgID: orgID, VersionID: versionID})
	if err != nil {
		return nil, err
	}
	out := make([]Deployment, 0, len(rows))
	for _, r := range rows {
		out = append(out, deploymentOf(r.Deployment, r.TargetName))
	}
	return out, nil
}

// step is where a deployment stands, read fresh before each step.
type step struct {
	d   db.Deployment
	ver db.ModelVersion
	m   db.RegisteredModel
	t   db.ServingTarget
}

func (s *Service) load(ctx context.Context, id uuid.UUID) (step, error) {
	q := db.New(s.Pool)
	d, err := q.DeploymentGetByID(ctx, id)
	if err != nil {
		return step{}, err
	}
	row, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: d.OrgID, ID: d.VersionID})
	if err != nil {
		return step{}, err
	}
	st := step{d: d, ver: row.ModelVersion, m: row.RegisteredModel}
	if d.TargetID.Valid {
		if st.t, err = s.Serving.Get(ctx, d.OrgID, d.TargetID.UUID); err != nil {
			return step{}, err
		}
	}
	return st, nil
}

// Advance carries a deployment out, one stored step at a time: load the
// version on the target, check the target serves it, then move the alias
// and write the history in one transaction. Each step's result is stored
// before the next, and a load is asked for only when the target does not
// already list the version, so a worker killed at any point resumes without
// loading twice. A deployment that has ended is left as it is.
func (s *Service) Advance(ctx context.Context, id uuid.UUID) error {
	st, err := s.load(ctx, id)
	if err != nil {
		return err
	}
	if st.d.Status == db.DeploymentStatusSucceeded || st.d.Status == db.DeploymentStatusFailed {
		return nil
	}
	q := db.New(s.Pool)
	if err := q.DeploymentUpdateRunning(ctx, id); err != nil {
		return err
	}
	if st.d.LoadedAt == nil {
		result, err := s.put(ctx, st)
		if err != nil {
			return err
		}
		if err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
			// Recorded once, should two attempts have got this far.
			if n, err := q.DeploymentUpdateLoaded(ctx, id); err != nil || n == 0 {
				return err
			}
			return s.history(ctx, q, st, "loaded", st.ver.Version, result)
		}); err != nil {
			return err
		}
	}
	if st.d.VerifiedAt == nil {
		if err := s.verify(ctx, st); err != nil {
			return err
		}
		if err := q.DeploymentUpdateVerified(ctx, id); err != nil {
			return err
		}
	}
	if st.d.Action == actionLoad {
		return s.finishLoad(ctx, id)
	}
	return s.moveAlias(ctx, id)
}

// finishLoad ends a load the target lists: its version is served there
// from now on, and no alias moves.
func (s *Service) finishLoad(ctx context.Context, id uuid.UUID) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		d, err := q.DeploymentGetForUpdate(ctx, id)
		if err != nil || d.Status != db.DeploymentStatusRunning {
			return err
		}
		if err := q.DeploymentUpdateSucceeded(ctx, id); err != nil {
			return err
		}
		return reloaded(ctx, q, d)
	})
}

// put loads the version on its target and says what the target answered.
func (s *Service) put(ctx context.Context, st step) (string, error) {
	switch st.t.Kind {
	case serving.KindVLLM:
		c, err := s.Serving.VLLM(st.t)
		if err != nil {
			return "", err
		}
		served, err := s.Serving.Models(ctx, st.t)
		if err != nil {
			return "", err
		}
		if ok, _ := serving.Lists(served, st.d.ServedName, ""); ok {
			return "already served as " + st.d.ServedName, nil
		}
		err = c.Load(ctx, st.d.ServedName, st.ver.ModelID)
		if errors.Is(err, serving.ErrAlreadyLoaded) {
			return "already loaded as " + st.d.ServedName, nil
		}
		if err != nil {
			return "", err
		}
		return "loaded as " + st.d.ServedName, nil
	case serving.KindVLLMPooling:
		// Nothing is loaded: the server runs the reward model it was
		// started with, or the deployment is refused.
		name, err := s.pooled(ctx, st)
		if err != nil {
			return "", err
		}
		if name != st.d.ServedName {
			if err := db.New(s.Pool).DeploymentUpdateServedName(ctx, db.DeploymentUpdateServedNameParams{ID: st.d.ID, ServedName: name}); err != nil {
				return "", err
			}
		}
		return "already served by the pooling runner as " + name + "; nothing to load", nil
	case serving.KindWebhook:
		res, err := s.Serving.Notify(ctx, st.t, "deployment_"+st.d.ID.String(), s.message(ctx, st))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("accepted by the pipeline (%d)", res.StatusCode), nil
	default:
		return "served by the provider", nil
	}
}

// message is what a webhook target receives.
func (s *Service) message(ctx context.Context, st step) map[string]any {
	msg := map[string]any{
		"type": "model.deploy", "action": st.d.Action, "deployment_id": st.d.ID, "model": st.m.Name, "version": st.ver.Version,
		"model_id": st.ver.ModelID, "base_model": st.ver.BaseModel, "kind": st.ver.Kind, "alias": st.d.Alias,
		"previous_version": nil, "reason": st.d.Reason,
	}
	if st.d.PreviousVersionID.Valid {
		if p, err := db.New(s.Pool).ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: st.d.OrgID, ID: st.d.PreviousVersionID.UUID}); err == nil {
			msg["previous_version"] = p.ModelVersion.Version
		}
	}
	return msg
}

// pooled asks a vLLM pooling target for the name it serves the version's
// model under; a target running another model refuses the deployment.
func (s *Service) pooled(ctx context.Context, st step) (string, error) {
	served, err := s.Serving.Models(ctx, st.t)
	if err != nil {
		return "", err
	}
	name, ok := serving.Serves(served, st.ver.ModelID)
	if !ok {
		return "", &Refused{Reason: fmt.Sprintf("the target %s does not serve %s: start vLLM there with that model and the pooling runner (vllm serve %s --runner pooling), then deploy again",
			st.t.Name, st.ver.ModelID, st.ver.ModelID)}
	}
	return name, nil
}

// verify checks a vLLM target lists the adapter on the right base model,
// or a pooling target the reward model.
func (s *Service) verify(ctx context.Context, st step) error {
	if st.t.Kind == serving.KindVLLMPooling {
		_, err := s.pooled(ctx, st)
		return err
	}
	if st.t.Kind != serving.KindVLLM {
		return nil
	}
	served, err := s.Serving.Models(ctx, st.t)
	if err != nil {
		return err
	}
	ok, err := serving.Lists(served, st.d.ServedName, st.ver.BaseModel)
	if err != nil {
		return &Refused{Reason: err.Error()}
	}
	if !ok {
		return &Refused{Reason: fmt.Sprintf("the server accepted the adapter but does not list %s", st.d.ServedName)}
	}
	return nil
}

// Refused is a target's answer that retrying will not change.
type Refused struct{ Reason string }

func (e *Refused) Error() string { return e.Reason }

// moveAlias points the alias at the version, records the move and queues
// the unloading of what the alias served before, in one transaction.
func (s *Service) moveAlias(ctx context.Context, id uuid.UUID) error {
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		d, err := q.DeploymentGetForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if d.Status != db.DeploymentStatusRunning {
			return nil
		}
		st, err := s.load(ctx, id)
		if err != nil {
			return err
		}
		before, err := q.DeploymentGetLatestSucceeded(ctx, db.DeploymentGetLatestSucceededParams{
			OrgID: d.OrgID, RegisteredModelID: d.RegisteredModelID, Alias: d.Alias})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		from := ""
		var fromID uuid.NullUUID
		if a, err := q.ModelAliasGet(ctx, db.ModelAliasGetParams{OrgID: d.OrgID, RegisteredModelID: d.RegisteredModelID, Alias: d.Alias}); err == nil {
			fromID = uuid.NullUUID{UUID: a.VersionID, Valid: true}
			if p, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: d.OrgID, ID: a.VersionID}); err == nil {
				from = p.ModelVersion.Version
			}
		}
		if err := q.ModelAliasUpdateVersion(ctx, db.ModelAliasUpdateVersionParams{
			OrgID: d.OrgID, RegisteredModelID: d.RegisteredModelID, Alias: d.Alias, VersionID: d.VersionID}); err != nil {
			return err
		}
		if err := q.ModelVersionUpdateDeployed(ctx, db.ModelVersionUpdateDeployedParams{OrgID: d.OrgID, ID: d.VersionID}); err != nil {
			return err
		}
		// The version the alias left is deprecated once no alias names it.
		if fromID.Valid && fromID.UUID != d.VersionID {
			n, err := q.ModelAliasCountByVersion(ctx, db.ModelAliasCountByVersionParams{OrgID: d.OrgID, VersionID: fromID.UUID})
			if err != nil {
				return err
			}
			if n == 0 {
				if err := q.ModelVersionUpdateStatus(ctx, db.ModelVersionUpdateStatusParams{OrgID: d.OrgID, ID: fromID.UUID, Status: db.ModelVersionStatusDeprecated}); err != nil {
					return err
				}
			}
		}
		if err := q.DeploymentUpdateSucceeded(ctx, id); err != nil {
			return err
		}
		if err := reloaded(ctx, q, d); err != nil {
			return err
		}
		h := db.ModelHistoryInsertParams{
			OrgID: d.OrgID, RegisteredModelID: d.RegisteredModelID, ActorLabel: d.CreatedByLabel, Action: "alias_moved",
			Alias: d.Alias, FromVersion: from, ToVersion: st.ver.Version, Target: st.t.Name, Reason: d.Reason,
			Result: d.Action, DeploymentID: uuid.NullUUID{UUID: d.ID, Valid: true},
		}
		if err := q.ModelHistoryInsert(ctx, h); err != nil {
			return err
		}
		// What the alias served before stays loaded for the target's grace
		// period, so requests already sent to it finish, then goes.
		if before.ID != uuid.Nil && before.ServedName != "" && before.ServedName != d.ServedName && before.UnloadedAt == nil {
			grace := time.Duration(st.t.UnloadGraceS) * time.Second
			if _, err := s.Jobs.InsertTx(ctx, tx, UnloadArgs{DeploymentID: before.ID}, &river.InsertOpts{ScheduledAt: time.Now().Add(grace)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// Fail ends a deployment that cannot go on, with the reason in words, and
// records it in the history. The alias stays where it was.
func (s *Service) Fail(ctx context.Context, id uuid.UUID, cause error) error {
	st, err := s.load(ctx, id)
	if err != nil {
		return err
	}
	reason := describe(cause)
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.DeploymentUpdateFailed(ctx, db.DeploymentUpdateFailedParams{ID: id, Error: reason}); err != nil {
			return err
		}
		return s.history(ctx, q, st, "deployment_failed", st.ver.Version, reason)
	})
}

// Permanent reports whether a deployment's error will not change by
// trying again: the target refused, or the outbound policy did.
func Permanent(err error) bool {
	var (
		refused *Refused
		status  *outbound.StatusError
		policy  *outbound.RefusedError
		badURL  *outbound.URLError
	)
	switch {
	case errors.As(err, &refused), errors.As(err, &policy), errors.As(err, &badURL):
		return true
	case errors.As(err, &status):
		return status.Status < 500 && status.Status != 429
	}
	return false
}

// describe says what went wrong in words fit for a page: the target's own
// text stays in the log.
func describe(err error) string {
	var refused *Refused
	if errors.As(err, &refused) {
		return upperFirst(refused.Reason) + "."
	}
	return outbound.Describe(err)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// history writes one entry about a deployment.
func (s *Service) history(ctx context.Context, q *db.Queries, st step, action, version, result string) error {
	return q.ModelHistoryInsert(ctx, db.ModelHistoryInsertParams{
		OrgID: st.d.OrgID, RegisteredModelID: st.d.RegisteredModelID, ActorLabel: st.d.CreatedByLabel, Action: action,
		Alias: st.d.Alias, ToVersion: version, Target: st.t.Name, Reason: st.d.Reason, Result: result,
		DeploymentID: uuid.NullUUID{UUID: st.d.ID, Valid: true},
	})
}

// Unload drops what a deployment loaded, unless something still uses it:
// its alias came back to it, or an arm of a running or paused experiment
// is called at it (whatever lets go of it queues its unloading again).
// The deployment is recorded as no longer served before the target is
// asked, in the transaction that checked nothing uses it, under the lock
// an experiment starting takes on it; unknown to the target means
// already gone.
func (s *Service) Unload(ctx context.Context, id uuid.UUID) error {
	st, err := s.load(ctx, id)
	if err != nil {
		return err
	}
	if st.t.Kind != serving.KindVLLM || st.d.ServedName == "" {
		return nil
	}
	if st.d.UnloadedAt == nil {
		inUse, shared := false, int64(0)
		err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
			if _, err := q.DeploymentGetForUpdate(ctx, id); err != nil {
				return err
			}
			if inUse, err = q.DeploymentGetInUse(ctx, id); err != nil || inUse {
				return err
			}
			if shared, err = q.DeploymentCountSharingName(ctx, id); err != nil {
				return err
			}
			if n, err := q.DeploymentUpdateUnloaded(ctx, id); err != nil || n == 0 {
				return err
			}
			if shared > 0 {
				// Another deployment took the adapter over: this one lets go
				// of it, and the adapter stays loaded for that one.
				return s.history(ctx, q, st, "unloaded", st.ver.Version, st.d.ServedName+" kept loaded for the deployment that took it over")
			}
			return s.history(ctx, q, st, "unloaded", st.ver.Version, st.d.ServedName+" unloaded")
		})
		if err != nil || inUse || shared > 0 {
			return err
		}
	} else if shared, err := db.New(s.Pool).DeploymentCountSharingName(ctx, id); err != nil || shared > 0 {
		// Let go of before, and held by another deployment since.
		return err
	}
	c, err := s.Serving.VLLM(st.t)
	if err != nil {
		return err
	}
	return c.Unload(ctx, st.d.ServedName)
}

// Resolved is what the assistant sends its requests to for an alias.
type Resolved struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	ModelID string `json:"model_id"`
	// Model is what to send as "model" in a chat request: the adapter's
	// served name on vLLM, the model id elsewhere.
	Model   string `json:"model"`
	BaseURL string `json:"base_url"`
	Target  string `json:"target"`
	// Fallback: the alias's version is not served now, and this is the
	// alias's last version that is, as its admin chose.
	Fallback bool `json:"fallback"`
}

// Resolve answers which version an alias of a registered model names, and
// where and under which name it is served. On a target that is asked what
// it serves, that is answered only while its last check, no older than
// the poll interval, listed it: otherwise an Unavailable error names the
// target and the adapter, or the alias's fallback answers.
func (s *Service) Resolve(ctx context.Context, orgID uuid.UUID, name, alias string) (Resolved, error) {
	v := &errs.Invalid{}
	v.Text("name", name, 64, true)
	v.Text("alias", alias, 64, true)
	if err := v.Err(); err != nil {
		return Resolved{}, err
	}
	q := db.New(s.Pool)
	m, err := q.RegisteredModelGetByName(ctx, db.RegisteredModelGetByNameParams{OrgID: orgID, Name: name})
	if err != nil {
		return Resolved{}, errs.NotFound(err)
	}
	a, err := q.ModelAliasGet(ctx, db.ModelAliasGetParams{OrgID: orgID, RegisteredModelID: m.ID, Alias: alias})
	if err != nil {
		return Resolved{}, errs.NotFound(err)
	}
	ver, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: a.VersionID})
	if err != nil {
		return Resolved{}, err
	}
	out := Resolved{Name: m.Name, Version: ver.ModelVersion.Version, ModelID: ver.ModelVersion.ModelID, Model: ver.ModelVersion.ModelID}
	d, err := q.DeploymentGetLatestSucceeded(ctx, db.DeploymentGetLatestSucceededParams{OrgID: orgID, RegisteredModelID: m.ID, Alias: alias})
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return Resolved{}, err
	}
	if d.ServedName != "" {
		out.Model = d.ServedName
	}
	if d.TargetID.Valid {
		t, err := s.Serving.Get(ctx, orgID, d.TargetID.UUID)
		if err != nil {
			return Resolved{}, err
		}
		out.Target, out.BaseURL = t.Name, t.BaseUrl
		// Only what the target listed at its last check, no older than
		// the poll interval, is answered.
		why, err := s.servedNow(ctx, d, t)
		if err != nil {
			return Resolved{}, err
		}
		if why != "" {
			if a.Fallback == FallbackLastHealthy {
				fb, ok, err := s.fallback(ctx, q, orgID, m.ID, alias, d.ID)
				if err != nil || ok {
					return fb, err
				}
				why += ", and no earlier version of the alias is listed to fall back to"
			}
			return Resolved{}, &errs.Unavailable{Message: fmt.Sprintf("%s %s under %q is not served now: %s.", m.Name, out.Version, alias, why)}
		}
	}
	return out, nil
}

// Traffic records in the model's history that an experiment moved traffic
// between two of its versions: a rollout step ("traffic_shifted") or an
// automatic rollback ("traffic_rolled_back"), with the reason. alias names
// the experiment.
func (s *Service) Traffic(ctx context.Context, actor audit.Actor, orgID, modelID uuid.UUID, action, alias, from, to, reason string) error {
	return db.New(s.Pool).ModelHistoryInsert(ctx, db.ModelHistoryInsertParams{OrgID: orgID, RegisteredModelID: modelID,
		ActorLabel: actor.Label, Action: action, Alias: alias, FromVersion: from, ToVersion: to, Reason: reason})
}
