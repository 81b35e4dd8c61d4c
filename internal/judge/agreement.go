package judge

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/stats"
)

// AgreementArgs asks a worker to run the judge over human-rated feedback.
type AgreementArgs struct {
	ID uuid.UUID `json:"id"`
}

// Kind names the job in River's table.
func (AgreementArgs) Kind() string { return "agreement_run" }

// KindAliases keeps the jobs queued under the kind's earlier name worked;
// it can go once no row of river_job has that kind.
func (AgreementArgs) KindAliases() []string { return []string{"judge_agreement"} }

// Limits and defaults of an agreement run.
const (
	DefaultThreshold = 0.4
	DefaultItems     = 500
	MaxItems         = 5000
	// thumbsUp is the judge score read as a thumbs up for kappa.
	thumbsUp = 0.5
)

// AgreementRequest is what an admin asks: the judge, the queue's filter,
// how far apart judge and human may be before it is a conflict, and how
// many of the newest matching items to judge.
type AgreementRequest struct {
	Endpoint  string
	Template  string
	Filter    feedback.Filter
	Threshold float64
	Items     int
}

// StartAgreement records an agreement run and queues its job, audited, in
// one transaction.
func (s *Service) StartAgreement(ctx context.Context, actor audit.Actor, orgID uuid.UUID, r AgreementRequest) (db.JudgeAgreement, error) {
	v := &errs.Invalid{}
	if r.Threshold == 0 {
		r.Threshold = DefaultThreshold
	}
	if r.Items == 0 {
		r.Items = DefaultItems
	}
	if !(r.Threshold > 0 && r.Threshold <= 1) {
		v.Add("threshold", "must be above 0 and at most 1")
	}
	if r.Items < 1 || r.Items > MaxItems {
		v.Add("items", "must be 1 to %d", MaxItems)
	}
	if _, _, err := s.Endpoints.Client(ctx, orgID, r.Endpoint); errors.Is(err, endpoints.ErrUnknown) {
		v.Add("endpoint", "no endpoint is named %q", r.Endpoint)
	} else if err != nil {
		return db.JudgeAgreement{}, err
	}
	tpl, err := s.Template(ctx, orgID, r.Template)
	if err != nil {
		v.Merge(err)
	}
	if err := v.Err(); err != nil {
		return db.JudgeAgreement{}, err
	}
	items, err := s.rated(ctx, db.New(s.Pool), orgID, r.Filter, r.Items)
	if err != nil {
		return db.JudgeAgreement{}, err
	}
	if len(items) < 2 {
		return db.JudgeAgreement{}, errs.InvalidField("filter", "matches %d items with a rating or thumbs; the judge needs at least 2 to compare with", len(items))
	}
	var out db.JudgeAgreement
	err = db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		var err error
		out, err = q.JudgeAgreementInsert(ctx, db.JudgeAgreementInsertParams{OrgID: orgID, Endpoint: r.Endpoint, Template: tpl.Name,
			TemplateVersion: int32(tpl.Version), Filter: r.Filter.Values().Encode(), Threshold: r.Threshold, ItemLimit: int32(r.Items),
			Total: int32(len(items)), CreatedByLabel: actor.Label})
		if err != nil {
			return err
		}
		job, err := s.Jobs.InsertTx(ctx, tx, AgreementArgs{ID: out.ID}, nil)
		if err != nil {
			return err
		}
		if err := q.JudgeAgreementUpdateRiverID(ctx, db.JudgeAgreementUpdateRiverIDParams{ID: out.ID, RiverJobID: pgtype.Int8{Int64: job.Job.ID, Valid: true}}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "judge.agreement", TargetType: "judge_agreement",
			TargetID: out.ID.String(), Details: map[string]any{"endpoint": r.Endpoint, "template": tpl.Name, "items": len(items)}})
	})
	return out, err
}

// rated is one human-rated feedback item: its human score in 0–1, and its
// thumb ("up", "down", or "" for a middling rating).
type rated struct {
	f     db.Feedback
	human float64
	thumb string
}

// rated reads the newest items matching the filter that a person rated:
// a rating 1–5 read as (r−1)/4, or thumbs as 1 or 0.
func (s *Service) rated(ctx context.Context, q *db.Queries, orgID uuid.UUID, f feedback.Filter, limit int) ([]rated, error) {
	ids, err := q.FeedbackListMatchingIDs(ctx, f.MatchingParams(orgID, limit))
	if err != nil {
		return nil, err
	}
	rows, err := q.FeedbackListByIDs(ctx, db.FeedbackListByIDsParams{OrgID: orgID, Ids: ids})
	if err != nil {
		return nil, err
	}
	// In the queue's order, newest first.
	pos := make(map[uuid.UUID]int, len(ids))
	for i, id := range ids {
		pos[id] = i
	}
	slices.SortFunc(rows, func(a, b db.Feedback) int { return pos[a.ID] - pos[b.ID] })
	var out []rated
	for _, r := range rows {
		switch {
		case r.Rating.Valid:
			x := rated{f: r, human: float64(r.Rating.Int16-1) / 4}
			if r.Rating.Int16 >= 4 {
				x.thumb = "up"
			} else if r.Rating.Int16 <= 2 {
				x.thumb = "down"
			}
			out = append(out, x)
		case r.FeedbackType == db.FeedbackTypeThumbsUp:
			out = append(out, rated{f: r, human: 1, thumb: "up"})
		case r.FeedbackType == db.FeedbackTypeThumbsDown:
			out = append(out, rated{f: r, human: 0, thumb: "down"})
		}
	}
	return out, nil
}

// AdvanceAgreement judges every item of a run (judgements are cached, so
// a restarted job pays for nothing twice), then writes the agreement and
// the conflicts. A spent budget pauses the run with the reason.
func (s *Service) AdvanceAgreement(ctx context.Context, id uuid.UUID) error {
	q := db.New(s.Pool)
	a, err := q.JudgeAgreementGetByID(ctx, id)
	if err != nil {
		return err
	}
	if a.Status == db.EvaluationStatusSucceeded || a.Status == db.EvaluationStatusFailed {
		return nil
	}
	values, err := url.ParseQuery(a.Filter)
	if err != nil {
		return err
	}
	filter, err := feedback.ParseFilter(values)
	if err != nil {
		return err
	}
	items, err := s.rated(ctx, q, a.OrgID, filter, int(a.ItemLimit))
	if err != nil {
		return err
	}
	if err := q.JudgeAgreementUpdateRunning(ctx, id); err != nil {
		return err
	}
	tpl := a.Template
	var humans, judged []float64
	var humanThumbs, judgeThumbs []string
	type conflict struct {
		r rated
		j Judgement
	}
	var conflicts []conflict
	invalid, calls := 0, 0
	var cost int64
	flush := func(done int) error {
		err := q.JudgeAgreementUpdateProgress(ctx, db.JudgeAgreementUpdateProgressParams{ID: id, Done: int32(done), Invalid: int32(invalid),
			JudgeCalls: int32(calls), JudgeCostMicros: cost})
		calls, cost = 0, 0
		return err
	}
	for i, it := range items {
		in := scorers.Input{Query: it.f.Query, Answer: it.f.Response}
		var docs []string
		_ = json.Unmarshal(pairs.Documents(it.f.Context), &docs)
		in.Context = docs
		j, err := s.Judge(ctx, a.OrgID, Request{Endpoint: a.Endpoint, Template: tpl, Input: in, Purpose: "agreement " + id.String()})
		calls, cost = calls+j.Calls, cost+int64(j.Cost)
		var budget *BudgetError
		switch {
		case errors.As(err, &budget):
			if ferr := flush(i); ferr != nil {
				return ferr
			}
			return q.JudgeAgreementUpdatePaused(ctx, db.JudgeAgreementUpdatePausedParams{ID: id, PausedReason: budget.Describe()})
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil || j.Invalid != "":
			invalid++
		default:
			humans, judged = append(humans, it.human), append(judged, j.Score)
			if it.thumb != "" {
				jt := "down"
				if j.Score >= thumbsUp {
					jt = "up"
				}
				humanThumbs, judgeThumbs = append(humanThumbs, it.thumb), append(judgeThumbs, jt)
			}
			if math.Abs(it.human-j.Score) > a.Threshold {
				conflicts = append(conflicts, conflict{it, j})
			}
		}
		if (i+1)%10 == 0 {
			if err := flush(i + 1); err != nil {
				return err
			}
		}
	}
	p := db.JudgeAgreementUpdateFinishedParams{ID: id, Done: int32(len(items)), Invalid: int32(invalid), Conflicts: int32(len(conflicts))}
	if rho, err := stats.Spearman(humans, judged); err == nil {
		p.Spearman = pgtype.Float8{Float64: rho, Valid: true}
	}
	if k, err := stats.CohenKappa(humanThumbs, judgeThumbs); err == nil {
		p.Kappa = pgtype.Float8{Float64: k.Kappa, Valid: !math.IsNaN(k.Kappa)}
		if p.Agreement, err = json.Marshal(k); err != nil {
			return err
		}
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.JudgeAgreementUpdateProgress(ctx, db.JudgeAgreementUpdateProgressParams{ID: id, Done: int32(len(items)),
			Invalid: int32(invalid), JudgeCalls: int32(calls), JudgeCostMicros: cost}); err != nil {
			return err
		}
		for _, c := range conflicts {
			if err := q.JudgeConflictInsert(ctx, db.JudgeConflictInsertParams{OrgID: a.OrgID, AgreementID: id, FeedbackID: c.r.f.ID,
				HumanScore: c.r.human, JudgeScore: c.j.Score, JudgeSafetyFlag: c.j.Safety, Critique: c.j.Critique}); err != nil {
				return err
			}
		}
		return q.JudgeAgreementUpdateFinished(ctx, p)
	})
}

// FailAgreement ends a run that cannot go on, with the reason in words.
func (s *Service) FailAgreement(ctx context.Context, id uuid.UUID, cause error) error {
	return db.New(s.Pool).JudgeAgreementUpdateFailed(ctx, db.JudgeAgreementUpdateFailedParams{ID: id, Error: outbound.Describe(cause)})
}

// Agreement is a run as pages and the API show it.
type Agreement struct {
	db.JudgeAgreement
	// Table is the thumbs confusion table, human rows, judge columns.
	Table *stats.Agreement
}

// GetAgreement reads one run of the organisation.
func (s *Service) GetAgreement(ctx context.Context, orgID, id uuid.UUID) (Agreement, error) {
	a, err := db.New(s.Pool).JudgeAgreementGet(ctx, db.JudgeAgreementGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Agreement{}, errs.NotFound(err)
	}
	out := Agreement{JudgeAgreement: a}
	if a.Agreement != nil {
		out.Table = &stats.Agreement{}
		if err := json.Unmarshal(a.Agreement, out.Table); err != nil {
			return Agreement{}, err
		}
	}
	return out, nil
}

// Agreements lists the organisation's runs, newest first.
func (s *Service) Agreements(ctx context.Context, orgID uuid.UUID) ([]db.JudgeAgreement, error) {
	return db.New(s.Pool).JudgeAgreementList(ctx, orgID)
}

// Resolutions of a conflict.
var Resolutions = []string{"judge_right", "human_right", "both_wrong"}

// MaxNote bounds a resolution's note.
const MaxNote = 4000

// Conflicts lists the conflict queue: open ones, or resolved ones.
func (s *Service) Conflicts(ctx context.Context, orgID uuid.UUID, resolved bool) ([]db.JudgeConflictListRow, error) {
	return db.New(s.Pool).JudgeConflictList(ctx, db.JudgeConflictListParams{OrgID: orgID, Resolved: resolved})
}

// OpenConflicts counts the conflicts waiting for an expert.
func (s *Service) OpenConflicts(ctx context.Context, orgID uuid.UUID) (int64, error) {
	return db.New(s.Pool).JudgeConflictCountOpen(ctx, orgID)
}

// Resolve records an expert's verdict on a conflict, audited; the
// resolutions are kept to tune the judge's template.
func (s *Service) Resolve(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, resolution, note string) error {
	v := &errs.Invalid{}
	if !slices.Contains(Resolutions, resolution) {
		v.Add("resolution", "choose: the judge is right, the person is right, or both are wrong")
	}
	v.Text("note", note, MaxNote, false)
	if err := v.Err(); err != nil {
		return err
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		n, err := q.JudgeConflictUpdateResolution(ctx, db.JudgeConflictUpdateResolutionParams{OrgID: orgID, ID: id,
			Resolution: db.NullConflictResolution{ConflictResolution: db.ConflictResolution(resolution), Valid: true}, Note: note, ResolvedByLabel: actor.Label})
		if err != nil {
			return err
		}
		if n == 0 {
			// Another organisation's conflict is simply not found.
			if _, err := q.JudgeConflictGet(ctx, db.JudgeConflictGetParams{OrgID: orgID, ID: id}); err != nil {
				return errs.NotFound(err)
			}
			return &errs.Conflict{Message: "This conflict is already resolved."}
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "judge.conflict_resolve", TargetType: "judge_conflict",
			TargetID: id.String(), Details: map[string]any{"resolution": resolution}})
	})
}

// Choices are what the start form offers: the organisation's endpoints
// and its templates' newest versions.
func (s *Service) Choices(ctx context.Context, orgID uuid.UUID) ([]endpoints.Endpoint, []Template, error) {
	eps, err := s.Endpoints.List(ctx, orgID)
	if err != nil {
		return nil, nil, err
	}
	all, err := s.Templates(ctx, orgID)
	if err != nil {
		return nil, nil, err
	}
	var newest []Template
	for _, t := range all {
		if !slices.ContainsFunc(newest, func(n Template) bool { return n.Name == t.Name }) {
			newest = append(newest, t)
		}
	}
	return eps, newest, nil
}

// Settings are what the judges page shows: the endpoints, every version of
// every template, and this month's spending.
type Settings struct {
	Endpoints []endpoints.Endpoint
	Templates []Template
	Budget    Budget
}

// Settings reads the organisation's judge settings.
func (s *Service) Settings(ctx context.Context, orgID uuid.UUID) (Settings, error) {
	var out Settings
	var err error
	if out.Endpoints, err = s.Endpoints.List(ctx, orgID); err != nil {
		return out, err
	}
	if out.Templates, err = s.Templates(ctx, orgID); err != nil {
		return out, err
	}
	out.Budget, err = s.Budget(ctx, orgID)
	return out, err
}

// ResumeAgreement carries a run that has not finished on: a paused one,
// or one whose worker stopped. Judgements are cached, so nothing judged
// is paid for twice. A run whose job is queued or running in a live
// worker needs no resuming, and one that finished cannot be.
func (s *Service) ResumeAgreement(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID) error {
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		a, err := q.JudgeAgreementGetForUpdate(ctx, db.JudgeAgreementGetForUpdateParams{OrgID: orgID, ID: id})
		if err != nil {
			return errs.NotFound(err)
		}
		if a.Status == db.EvaluationStatusSucceeded || a.Status == db.EvaluationStatusFailed {
			return &errs.Conflict{Message: "This run has finished: start a new one to measure again."}
		}
		var jobID int64
		if a.Status == db.EvaluationStatusPaused || !a.RiverJobID.Valid {
			job, err := s.Jobs.InsertTx(ctx, tx, AgreementArgs{ID: id}, nil)
			if err != nil {
				return err
			}
			jobID = job.Job.ID
		} else if jobID, err = jobq.Revive(ctx, tx, s.Jobs, a.RiverJobID.Int64, AgreementArgs{ID: id}); errors.Is(err, jobq.ErrLive) {
			return &errs.Conflict{Message: "This run is under way: its worker carries it on."}
		} else if err != nil {
			return err
		}
		if err := q.JudgeAgreementUpdateResumed(ctx, db.JudgeAgreementUpdateResumedParams{OrgID: orgID, ID: id,
			RiverJobID: pgtype.Int8{Int64: jobID, Valid: true}}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "judge.agreement_resume", TargetType: "judge_agreement",
			TargetID: id.String(), Details: map[string]any{"status": string(a.Status)}})
	})
}

// AbandonAgreement pauses a run whose job was given up, with the reason;
// resuming it judges on, from the cache where it had judged.
func (s *Service) AbandonAgreement(ctx context.Context, id uuid.UUID, reason string) error {
	return db.New(s.Pool).JudgeAgreementUpdatePaused(ctx, db.JudgeAgreementUpdatePausedParams{ID: id, PausedReason: reason})
}

// AgreementStalled reports whether a run that has not finished has no job
// carrying it on: paused, or its worker stopped. An admin can resume it.
func (s *Service) AgreementStalled(ctx context.Context, a db.JudgeAgreement) (bool, error) {
	switch a.Status {
	case db.EvaluationStatusPaused:
		return true, nil
	case db.EvaluationStatusQueued, db.EvaluationStatusRunning:
		return jobq.Stalled(ctx, db.New(s.Pool), a.RiverJobID.Int64)
	}
	return false, nil
}
