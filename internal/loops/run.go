package loops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/hygiene"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/pricing"
)

// Service keeps the policies and carries their runs out.
type Service struct {
	Pool *pgxpool.Pool
	// Jobs inserts each step's job in the transaction that ends the step
	// before it.
	Jobs jobq.Inserter
	Services
	// Hygiene flags spam, bots and floods before a run collects.
	Hygiene *hygiene.Service
	// Alerts opens an alert when a run fails; nil opens none.
	Alerts *alerts.Service
	// Poll is how long a step waits between two looks at what it waits
	// for (a training job, a deployment, an evaluation, a rollout).
	Poll time.Duration
	// Log receives what went wrong in detail; a run's page shows a
	// sentence.
	Log *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// New builds the loops' service: jobs queues each step, svc are the
// services the steps call, hygiene flags what a run collects, alerts opens
// an alert when a run fails (nil opens none), poll is how long a waiting
// step waits between two looks (a default when 0), and log receives the
// detail of what went wrong.
func New(pool *pgxpool.Pool, jobs jobq.Inserter, svc Services, hygiene *hygiene.Service, alerts *alerts.Service, poll time.Duration, log *slog.Logger) *Service {
	return &Service{Pool: pool, Jobs: jobs, Services: svc, Hygiene: hygiene, Alerts: alerts, Poll: poll, Log: log}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) poll() time.Duration {
	if s.Poll > 0 {
		return s.Poll
	}
	return 15 * time.Second
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// Run statuses.
const (
	RunRunning         = "running"
	RunWaitingApproval = "waiting_approval"
	RunSucceeded       = "succeeded"
	RunFailed          = "failed"
	RunStopped         = "stopped"
	RunSkipped         = "skipped"
)

// Step statuses.
const (
	StepPending   = "pending"
	StepRunning   = "running"
	StepWaiting   = "waiting"
	StepSucceeded = "succeeded"
	StepFailed    = "failed"
	StepSkipped   = "skipped"
	StepStopped   = "stopped"
)

// The steps of a run, in order; a run ends with rollout when its policy
// has one, with promote otherwise.
const (
	StepCollect  = "collect"
	StepDataset  = "dataset"
	StepFreeze   = "freeze"
	StepTrain    = "train"
	StepRegister = "register"
	StepStage    = "stage"
	StepEvaluate = "evaluate"
	StepGate     = "gate"
	StepRollout  = "rollout"
	StepPromote  = "promote"
)

// Steps are the steps of a run of sp.
func Steps(sp Spec) []string {
	last := StepPromote
	if sp.Rollout != nil {
		last = StepRollout
	}
	return []string{StepCollect, StepDataset, StepFreeze, StepTrain, StepRegister, StepStage, StepEvaluate, StepGate, last}
}

// approvalBefore is the step a person must approve before, or "".
func approvalBefore(sp Spec) string {
	switch sp.Approval {
	case ApproveBeforeDeploy:
		return StepStage
	case ApproveBeforeRollout:
		return Steps(sp)[len(Steps(sp))-1]
	}
	return ""
}

// StepArgs asks a worker to take a step of a run.
type StepArgs struct {
	RunID uuid.UUID `json:"run_id"`
	Step  string    `json:"step"`
}

// Kind names the job in River's table.
func (StepArgs) Kind() string { return "loop_run_advance" }

// InsertOpts: a step's errors are retried a few times with River's
// backoff; its waits are snoozes, which use up no attempt.
func (StepArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 8} }

// TriggerArgs asks a worker to look at every active loop's trigger.
type TriggerArgs struct{}

// Kind names the job in River's table.
func (TriggerArgs) Kind() string { return "loop_trigger_check" }

// InsertOpts: a failed look is not retried, the next one comes soon.
func (TriggerArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }

// Started-by values.
const (
	ByItems    = "items"
	BySchedule = "schedule"
	ByPerson   = "person"
)

// actorOf signs what a run does: its services record the run as the one
// who did it.
func actorOf(loopName string, number int32) audit.Actor {
	return audit.Actor{Kind: "system", Label: fmt.Sprintf("loop %s run #%d", loopName, number)}
}

// StartNow starts a run of a loop at once, trigger or not (a loop that is
// paused too). A loop with a run under way is a conflict.
func (s *Service) StartNow(ctx context.Context, actor audit.Actor, orgID, loopID uuid.UUID) (Run, error) {
	r, err := s.start(ctx, orgID, loopID, ByPerson, actor)
	if err != nil {
		return Run{}, err
	}
	return s.GetRun(ctx, orgID, r.ID)
}

// start records a run with its steps and queues its first step, in one
// transaction that holds the loop's row.
func (s *Service) start(ctx context.Context, orgID, loopID uuid.UUID, by string, actor audit.Actor) (db.LoopRun, error) {
	var run db.LoopRun
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		p, err := q.LoopGetForUpdate(ctx, db.LoopGetForUpdateParams{OrgID: orgID, ID: loopID})
		if err != nil {
			return errs.NotFound(err)
		}
		l, err := loopOf(p)
		if err != nil {
			return err
		}
		steps := Steps(l.Spec)
		run, err = q.LoopRunInsert(ctx, db.LoopRunInsertParams{OrgID: orgID, LoopID: loopID, StartedBy: by, StartedByLabel: actor.Label,
			Spec: p.Spec, Step: steps[0]})
		if errs.IsUnique(err, "loop_runs_one_open") {
			return &errs.Conflict{Message: fmt.Sprintf("A run of %s is under way: wait for it to end, or stop it, before starting another.", l.Name)}
		}
		if err != nil {
			return err
		}
		for i, name := range steps {
			if err := q.LoopStepInsert(ctx, db.LoopStepInsertParams{RunID: run.ID, OrgID: orgID, Position: int16(i), Name: name}); err != nil {
				return err
			}
		}
		if _, err := s.Jobs.InsertTx(ctx, tx, StepArgs{RunID: run.ID, Step: steps[0]}, nil); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "loop.run_start", TargetType: "loop_run",
			TargetID: run.ID.String(), Details: map[string]any{"loop": l.Name, "number": run.Number, "started_by": by}})
	})
	return run, err
}

// CheckTriggers starts a run of every active loop whose trigger is met
// and that has none under way.
func (s *Service) CheckTriggers(ctx context.Context) error {
	q := db.New(s.Pool)
	loops, err := q.LoopListActive(ctx)
	if err != nil {
		return err
	}
	var all []error
	for _, l := range loops {
		if l.Busy {
			continue
		}
		by, err := s.due(ctx, q, l)
		if err != nil {
			all = append(all, fmt.Errorf("loop %s: %w", l.ID, err))
			continue
		}
		if by == "" {
			continue
		}
		if _, err := s.start(ctx, l.OrgID, l.ID, by, audit.Actor{Kind: "system", Label: "loop trigger"}); err != nil {
			var c *errs.Conflict
			if !errors.As(err, &c) { // a person started one meanwhile
				all = append(all, fmt.Errorf("loop %s: %w", l.ID, err))
			}
		}
	}
	return errors.Join(all...)
}

// never is what the trigger's queries answer for "no run yet".
var never = time.Unix(0, 0)

// due says why a loop's trigger is met ("items" or "schedule"), or "".
func (s *Service) due(ctx context.Context, q *db.Queries, l db.LoopListActiveRow) (string, error) {
	if l.Schedule != "" {
		since := l.LastRunAt
		if !since.After(never) {
			since = l.CreatedAt
		}
		if s.now().Before(since.Add(schedulePeriod(l.Schedule))) {
			return "", nil
		}
	}
	if l.MinNewItems > 0 {
		var sp Spec
		if err := json.Unmarshal(l.Spec, &sp); err != nil {
			return "", err
		}
		var since *time.Time
		if l.LastCollectedAt.After(never) {
			since = &l.LastCollectedAt
		}
		n, err := s.countNew(ctx, q, l.OrgID, sp, since)
		if err != nil {
			return "", err
		}
		if n.Eligible < int64(l.MinNewItems) {
			return "", nil
		}
	}
	if l.Schedule != "" {
		return BySchedule, nil
	}
	return ByItems, nil
}

// Run is a run as the API shows it.
type Run struct {
	ID     uuid.UUID `json:"id"`
	LoopID uuid.UUID `json:"loop_id"`
	Loop   string    `json:"loop"`
	Number int       `json:"number"`
	Status string    `json:"status"`
	Reason string    `json:"reason"`
	// Step is the step under way, or the last one taken.
	Step           string     `json:"step"`
	Steps          []StepView `json:"steps"`
	ModelVersionID *uuid.UUID `json:"model_version_id"`
	// DatasetVersionID and ContentHash are what the run trains on, once
	// frozen.
	DatasetVersionID *uuid.UUID `json:"dataset_version_id"`
	ContentHash      string     `json:"content_hash"`
	StartedBy        string     `json:"started_by"`
	StartedByLabel   string     `json:"started_by_label"`
	// WaitingFor is where the run waits for a person (before_deploy,
	// before_rollout), and Approvers who may approve.
	WaitingFor string     `json:"waiting_for,omitempty"`
	Approvers  []string   `json:"approvers,omitempty"`
	ApprovedBy string     `json:"approved_by,omitempty"`
	CostUSD    float64    `json:"cost_usd"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// StepView is one step of a run.
type StepView struct {
	Name       string            `json:"name"`
	Status     string            `json:"status"`
	StartedAt  *time.Time        `json:"started_at"`
	FinishedAt *time.Time        `json:"finished_at"`
	Detail     string            `json:"detail"`
	Links      map[string]string `json:"links"`
	Outcome    json.RawMessage   `json:"outcome"`
	CostUSD    float64           `json:"cost_usd"`
}

func runOf(r db.LoopRun, loopName string, steps []db.LoopRunStep) Run {
	out := Run{ID: r.ID, LoopID: r.LoopID, Loop: loopName, Number: int(r.Number), Status: r.Status, Reason: r.Reason, Step: r.Step,
		ContentHash: r.ContentHash, StartedBy: r.StartedBy, StartedByLabel: r.StartedByLabel, WaitingFor: r.WaitingFor,
		ApprovedBy: r.ApprovedByLabel, CostUSD: pricing.Micros(r.CostMicros).Dollars(), CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
		Steps: make([]StepView, 0, len(steps))}
	if r.ModelVersionID.Valid {
		out.ModelVersionID = &r.ModelVersionID.UUID
	}
	if r.DatasetVersionID.Valid {
		out.DatasetVersionID = &r.DatasetVersionID.UUID
	}
	for _, st := range steps {
		v := StepView{Name: st.Name, Status: st.Status, StartedAt: st.StartedAt, FinishedAt: st.FinishedAt, Detail: st.Detail,
			Links: map[string]string{}, Outcome: st.Outcome, CostUSD: pricing.Micros(st.CostMicros).Dollars()}
		_ = json.Unmarshal(st.Links, &v.Links)
		out.Steps = append(out.Steps, v)
	}
	return out
}

// GetRun returns a run of the organisation with its steps.
func (s *Service) GetRun(ctx context.Context, orgID, id uuid.UUID) (Run, error) {
	q := db.New(s.Pool)
	r, err := q.LoopRunGet(ctx, db.LoopRunGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Run{}, errs.NotFound(err)
	}
	steps, err := q.LoopStepList(ctx, r.ID)
	if err != nil {
		return Run{}, err
	}
	var sp Spec
	if err := json.Unmarshal(r.Spec, &sp); err != nil {
		return Run{}, err
	}
	out := runOf(r, sp.Name, steps)
	if r.Status == RunWaitingApproval {
		if out.Approvers, err = q.LoopListApprovers(ctx, orgID); err != nil {
			return Run{}, err
		}
	}
	return out, nil
}

// RunListName names a loop's runs in their cursors.
const RunListName = "loop-runs"

// Runs lists a loop's runs with their steps, newest first, one keyset
// page at a time.
func (s *Service) Runs(ctx context.Context, orgID, loopID uuid.UUID, c *keyset.Cursor, limit int) ([]Run, *keyset.Cursor, error) {
	q := db.New(s.Pool)
	p, err := q.LoopGet(ctx, db.LoopGetParams{OrgID: orgID, ID: loopID})
	if err != nil {
		return nil, nil, errs.NotFound(err)
	}
	at, id := c.Bounds()
	rows, err := q.LoopRunList(ctx, db.LoopRunListParams{OrgID: orgID, LoopID: loopID, CursorTime: at, CursorID: id, RowLimit: int32(limit + 1)})
	if err != nil {
		return nil, nil, err
	}
	rows, next := keyset.Page(rows, limit, func(r db.LoopRun) keyset.Cursor { return keyset.Cursor{At: r.CreatedAt, ID: r.ID} })
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	steps, err := q.LoopStepListByRuns(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	var approvers []string
	out := make([]Run, 0, len(rows))
	for _, r := range rows {
		var mine []db.LoopRunStep
		for _, st := range steps {
			if st.RunID == r.ID {
				mine = append(mine, st)
			}
		}
		run := runOf(r, p.Name, mine)
		if r.Status == RunWaitingApproval {
			if approvers == nil {
				if approvers, err = q.LoopListApprovers(ctx, orgID); err != nil {
					return nil, nil, err
				}
			}
			run.Approvers = approvers
		}
		out = append(out, run)
	}
	return out, next, nil
}

// Approve lets a run waiting for a person go on: its next step is queued.
func (s *Service) Approve(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID) (Run, error) {
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		r, err := q.LoopRunGet(ctx, db.LoopRunGetParams{OrgID: orgID, ID: id})
		if err != nil {
			return errs.NotFound(err)
		}
		n, err := q.LoopRunUpdateApproved(ctx, db.LoopRunUpdateApprovedParams{OrgID: orgID, ID: id, ApprovedByLabel: actor.Label})
		if err != nil {
			return err
		}
		if n == 0 {
			return &errs.Conflict{Message: fmt.Sprintf("Run #%d is %s: only a run waiting for approval can be approved.", r.Number, words(r.Status))}
		}
		if err := q.LoopStepUpdateStarted(ctx, db.LoopStepUpdateStartedParams{RunID: id, Name: r.Step}); err != nil {
			return err
		}
		if _, err := s.Jobs.InsertTx(ctx, tx, StepArgs{RunID: id, Step: r.Step}, nil); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "loop.run_approve", TargetType: "loop_run",
			TargetID: id.String(), Details: map[string]any{"number": r.Number, "before": r.Step}})
	})
	if err != nil {
		return Run{}, err
	}
	return s.GetRun(ctx, orgID, id)
}

// Stop ends a run that has not ended: the step under way stops where it
// is (a training job under way is cancelled at its provider), and the
// steps after it are not taken.
func (s *Service) Stop(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID) (Run, error) {
	var r db.LoopRun
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		var err error
		r, err = q.LoopRunGet(ctx, db.LoopRunGetParams{OrgID: orgID, ID: id})
		if err != nil {
			return errs.NotFound(err)
		}
		reason := "Stopped by " + actor.Label + "."
		n, err := q.LoopRunUpdateFinished(ctx, db.LoopRunUpdateFinishedParams{ID: id, Status: RunStopped, Reason: reason})
		if err != nil {
			return err
		}
		if n == 0 {
			return &errs.Conflict{Message: fmt.Sprintf("Run #%d has already %s: there is nothing to stop.", r.Number, ended(r.Status))}
		}
		if err := s.endSteps(ctx, q, r, StepStopped, reason); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "loop.run_stop", TargetType: "loop_run",
			TargetID: id.String(), Details: map[string]any{"number": r.Number, "step": r.Step}})
	})
	if err != nil {
		return Run{}, err
	}
	// A job training for the run is cancelled: nothing more is paid for
	// a version no step will take.
	if r.Step == StepTrain && s.FineTune != nil {
		if st, err := db.New(s.Pool).LoopStepGet(ctx, db.LoopStepGetParams{RunID: id, Name: StepTrain}); err == nil {
			if job, ok := linksOf(st)["fine_tuning_job_id"]; ok {
				if jid, err := uuid.Parse(job); err == nil {
					if _, err := s.FineTune.Cancel(ctx, actor, orgID, jid); err != nil {
						var c *errs.Conflict
						if !errors.As(err, &c) {
							s.log().Warn("cancelling a stopped run's training job", "run", id, "job", jid, "err", err)
						}
					}
				}
			}
		}
	}
	return s.GetRun(ctx, orgID, id)
}

// endSteps marks the run's current step with status and the steps after
// it as not taken.
func (s *Service) endSteps(ctx context.Context, q *db.Queries, r db.LoopRun, status, detail string) error {
	st, err := q.LoopStepGet(ctx, db.LoopStepGetParams{RunID: r.ID, Name: r.Step})
	if err != nil {
		return err
	}
	if st.Status != StepSucceeded {
		if detail == "" {
			detail = st.Detail
		}
		if err := q.LoopStepUpdate(ctx, db.LoopStepUpdateParams{RunID: r.ID, Name: r.Step, Status: status, Detail: detail, Links: st.Links,
			Outcome: st.Outcome, CostMicros: st.CostMicros, Finished: true}); err != nil {
			return err
		}
	}
	return q.LoopStepUpdateRemaining(ctx, db.LoopStepUpdateRemainingParams{RunID: r.ID, Status: StepSkipped})
}

func linksOf(st db.LoopRunStep) map[string]string {
	out := map[string]string{}
	_ = json.Unmarshal(st.Links, &out)
	return out
}

// Artefact is the run a page's artefact came from.
type Artefact struct {
	RunID  uuid.UUID
	Number int
	Status string
	LoopID uuid.UUID
	Loop   string
	Step   string
}

// RunOf finds the run whose step made or used an artefact: kind is its
// link's name (dataset_id, dataset_version_id, fine_tuning_job_id,
// model_version_id, deployment_id, evaluation_run_id, experiment_key).
// ok is false when no run did.
func (s *Service) RunOf(ctx context.Context, orgID uuid.UUID, kind, id string) (Artefact, bool, error) {
	link, err := json.Marshal(map[string]string{kind: id})
	if err != nil {
		return Artefact{}, false, err
	}
	r, err := db.New(s.Pool).LoopStepGetByLink(ctx, db.LoopStepGetByLinkParams{OrgID: orgID, Link: link})
	if errors.Is(err, pgx.ErrNoRows) {
		return Artefact{}, false, nil
	}
	if err != nil {
		return Artefact{}, false, err
	}
	return Artefact{RunID: r.RunID, Number: int(r.Number), Status: r.Status, LoopID: r.LoopID, Loop: r.LoopName, Step: r.Step}, true, nil
}

// words says a run status in words.
func words(status string) string {
	return strings.ReplaceAll(status, "_", " ")
}

func ended(status string) string {
	switch status {
	case RunSucceeded:
		return "succeeded"
	case RunFailed:
		return "failed"
	case RunSkipped:
		return "been skipped"
	}
	return "been " + status
}

// finish ends a run with a status and a reason, in the caller's
// transaction: its current step takes stepStatus, the steps after it are
// not taken, and a failed run opens an alert (a succeeded one settles
// the loop's).
func (s *Service) finish(ctx context.Context, tx pgx.Tx, q *db.Queries, r db.LoopRun, sp Spec, status, stepStatus, reason string) error {
	n, err := q.LoopRunUpdateFinished(ctx, db.LoopRunUpdateFinishedParams{ID: r.ID, Status: status, Reason: reason})
	if err != nil || n == 0 {
		return err
	}
	if err := s.endSteps(ctx, q, r, stepStatus, reason); err != nil {
		return err
	}
	if s.Alerts == nil {
		return nil
	}
	key := alerts.KindLoopRun + ":" + r.LoopID.String()
	switch status {
	case RunFailed:
		return s.Alerts.RaiseTx(ctx, tx, r.OrgID, alerts.Condition{Kind: alerts.KindLoopRun, Severity: alerts.SeverityBad, Key: key,
			Title: fmt.Sprintf("Loop %s: run #%d failed at %s.", sp.Name, r.Number, r.Step), Message: reason,
			Details: map[string]any{"loop_id": r.LoopID, "run_id": r.ID, "step": r.Step, "evidence": "/loops/runs/" + r.ID.String()}})
	case RunSucceeded:
		return s.Alerts.SettleTx(ctx, tx, r.OrgID, key)
	}
	return nil
}

// Fail ends a run whose step cannot go on (its job's last attempt
// failed), with the reason.
func (s *Service) Fail(ctx context.Context, runID uuid.UUID, cause error) error {
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		r, err := q.LoopRunGetForUpdate(ctx, runID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var sp Spec
		if err := json.Unmarshal(r.Spec, &sp); err != nil {
			return err
		}
		s.log().Warn("a loop run's step failed", "run", runID, "step", r.Step, "err", cause)
		return s.finish(ctx, tx, q, r, sp, RunFailed, StepFailed, fmt.Sprintf("The %s step failed: %s", r.Step, describe(cause)))
	})
}

// Abandon fails a run whose step's job was given up with its worker gone
// on the last attempt, unless the run has moved past that step.
func (s *Service) Abandon(ctx context.Context, runID uuid.UUID, step, reason string) error {
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		r, err := q.LoopRunGetForUpdate(ctx, runID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil || r.Step != step {
			return err
		}
		var sp Spec
		if err := json.Unmarshal(r.Spec, &sp); err != nil {
			return err
		}
		return s.finish(ctx, tx, q, r, sp, RunFailed, StepFailed, fmt.Sprintf("The %s step failed: %s", step, reason))
	})
}
