// Package shadow runs shadow deployments: a share of the queries answered
// under a registered model's alias (production, say) is mirrored to a
// candidate version, which answers them on its serving target with no user
// seeing its answer; both answers are scored as an evaluation scores
// (rules, the judge within the organisation's judge budget, reward models,
// RAG metrics, the reward formula) and kept, and the two are compared
// query by query as two versions are compared on a golden set.
//
// Nothing runs in a user's request: feedback ingest and best-of-N only
// record what they did, as before (a best-of-N call that sampled a version
// records the version). A periodic job reads the feedback that arrived
// since each shadow's cursor under the names the alias's version is served
// by (feedback on a best-of-N call brings the call's context), and the
// best-of-N calls that sampled that version (their selected answer is
// production's), samples them by a hash of the shadow and their ids, and
// queues the shadow's job; that job takes one query at a time, recording
// each step before the next, so that no query is sent to the candidate, or
// to the judge, twice.
package shadow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/sampling"
	"github.com/curate/curate/internal/scorers"
)

// Service keeps the shadows and runs them.
type Service struct {
	Pool *pgxpool.Pool
	// Jobs queues the runs the sampling finds work for.
	Jobs jobq.Inserter
	// Eval checks and prepares the scoring (its Runner), and its gate
	// gives the margin of a regression.
	Eval *eval.Service
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// New builds shadow deployments on the evaluation service, whose runner
// asks the candidate on its serving target and scores both answers.
func New(pool *pgxpool.Pool, jobs jobq.Inserter, ev *eval.Service) *Service {
	return &Service{Pool: pool, Jobs: jobs, Eval: ev}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Limits.
const (
	// SampleBatch is how much feedback one sampling reads per shadow.
	SampleBatch = 5000
	// RunBatch is how many queries a run reads at a time.
	RunBatch = 100
	// MaxPaired is how many scored queries a shadow's comparison reads.
	MaxPaired = 10000
	// Lag keeps the sampling this far behind now, so that feedback a
	// transaction still holds is not passed by the cursor before it is
	// committed.
	Lag = time.Minute
	// SampleEvery is how often the shadows sample.
	SampleEvery = time.Minute
	// RunTimeout bounds one run; the next run takes what is left.
	RunTimeout = 10 * time.Minute
	// MaxList is how many shadows a list answers.
	MaxList = 200
)

// Statuses of a shadow and of its queries.
const (
	StatusRunning = "running"
	StatusStopped = "stopped"

	QueryPending  = "pending"
	QueryAnswered = "answered"
	QueryScored   = "scored"
	QuerySkipped  = "skipped"
	QueryFailed   = "failed"
)

// Request is what the API takes to shadow a candidate: the alias whose
// queries are mirrored, the serving target the candidate is called on
// (any serving it when empty), the share of queries mirrored, how both
// answers are scored (as an evaluation's scorers, judge and reward
// formula: the formula's scorers when none are named, the organisation's
// "default" formula when none is given) and when sampling stops.
type Request struct {
	Alias         string            `json:"alias"`
	Target        string            `json:"target"`
	Sample        float64           `json:"sample"`
	Scorers       []scorers.Config  `json:"scorers,omitempty"`
	Judge         *eval.JudgeConfig `json:"judge,omitempty"`
	RewardFormula json.RawMessage   `json:"reward_formula,omitempty"`
	Until         *time.Time        `json:"until,omitempty"`
}

// Shadow is a shadow as the API shows it.
type Shadow struct {
	ID                 uuid.UUID  `json:"id"`
	Model              string     `json:"model"`
	Alias              string     `json:"alias"`
	CandidateVersionID uuid.UUID  `json:"candidate_version_id"`
	CandidateVersion   string     `json:"candidate_version"`
	Target             string     `json:"target"`
	Sample             float64    `json:"sample"`
	Scorers            []string   `json:"scorers"`
	Formula            string     `json:"formula"`
	Until              *time.Time `json:"until"`
	Status             string     `json:"status"`
	StoppedReason      string     `json:"stopped_reason,omitempty"`
	StoppedAt          *time.Time `json:"stopped_at,omitempty"`
	Scored             int64      `json:"scored"`
	Open               int64      `json:"open"`
	Skipped            int64      `json:"skipped"`
	Failed             int64      `json:"failed"`
	JudgeCostUSD       float64    `json:"judge_cost_usd"`
	CreatedBy          string     `json:"created_by"`
	CreatedAt          time.Time  `json:"created_at"`
}

// Detail is a shadow with its paired comparison: A is production's
// answer, B the candidate's, each query an item (its source the
// feedback's id).
type Detail struct {
	Shadow
	Comparison eval.VersionPair `json:"comparison"`
}

// Evidence is what a candidate's shadows say of it: the paired
// difference of its newest shadow with scored queries, candidate less
// production, with its interval.
type Evidence struct {
	ShadowID   uuid.UUID       `json:"shadow_id"`
	Alias      string          `json:"alias"`
	Difference eval.Difference `json:"difference"`
}

// config is what a shadow keeps of how it scores.
func config(c eval.Config) eval.Config {
	return eval.Config{Scorers: c.Scorers, Judge: c.Judge, RewardFormula: c.RewardFormula, Formula: c.Formula}
}

// Create shadows a candidate version under its registered model's alias,
// audited. The candidate must be served on a target Curate can call (the
// named one, when named) and must not be what the alias serves; a new
// shadow samples the queries that arrive from then on.
func (s *Service) Create(ctx context.Context, actor audit.Actor, orgID, candidateID uuid.UUID, r Request) (Shadow, error) {
	v := &errs.Invalid{}
	if v.Text("alias", r.Alias, 64, true) && !models.ValidName(r.Alias) {
		v.Add("alias", "%s", models.NameRule)
	}
	v.Text("target", r.Target, 100, false)
	if math.IsNaN(r.Sample) || !(r.Sample > 0 && r.Sample <= 1) {
		v.Add("sample", "must be above 0 and at most 1: the share of the alias's queries mirrored to the candidate")
	}
	if r.Until != nil && !r.Until.After(s.now()) {
		v.Add("until", "must be in the future: when the shadow stops sampling")
	}
	if err := v.Err(); err != nil {
		return Shadow{}, err
	}
	q := db.New(s.Pool)
	cand, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: candidateID})
	if err != nil {
		return Shadow{}, errs.NotFound(err)
	}
	if cand.ModelVersion.Kind == models.KindReward {
		return Shadow{}, errs.InvalidField("id", "is a reward model: it scores answers and writes none")
	}
	alias, err := q.ModelAliasGet(ctx, db.ModelAliasGetParams{OrgID: orgID, RegisteredModelID: cand.ModelVersion.RegisteredModelID, Alias: r.Alias})
	if errors.Is(err, pgx.ErrNoRows) {
		return Shadow{}, errs.InvalidField("alias", "no version of %s holds the alias %q", cand.RegisteredModel.Name, r.Alias)
	} else if err != nil {
		return Shadow{}, err
	}
	if alias.VersionID == candidateID {
		return Shadow{}, errs.InvalidField("alias", "is held by this version already: shadow a version the alias does not serve")
	}
	if s.Eval == nil || s.Eval.Runner == nil {
		return Shadow{}, errors.New("shadow: no evaluation runner")
	}
	cfg, err := s.Eval.Runner.Check(ctx, orgID, eval.Config{Candidate: eval.Candidate{ModelVersionID: &candidateID, Target: r.Target},
		Scorers: r.Scorers, Judge: r.Judge, RewardFormula: r.RewardFormula})
	if err != nil {
		return Shadow{}, renameCandidate(err, r.Target)
	}
	raw, err := json.Marshal(config(cfg))
	if err != nil {
		return Shadow{}, err
	}
	var row db.Shadow
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		row, err = q.ShadowInsert(ctx, db.ShadowInsertParams{OrgID: orgID, RegisteredModelID: cand.ModelVersion.RegisteredModelID, Alias: r.Alias,
			CandidateVersionID: candidateID, Target: r.Target, Sample: r.Sample, Config: raw, Formula: cfg.Formula, Until: r.Until,
			CreatedByLabel: actor.Label})
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "shadow.create", TargetType: "model_version", TargetID: candidateID.String(),
			Details: map[string]any{"shadow_id": row.ID.String(), "alias": r.Alias, "target": r.Target, "sample": r.Sample, "formula": cfg.Formula}})
	})
	if err != nil {
		return Shadow{}, err
	}
	return s.Get(ctx, orgID, row.ID)
}

// renameCandidate words the runner's refusal of the candidate as one of
// the request's fields: the target, or the version the path names.
func renameCandidate(err error, target string) error {
	var inv *errs.Invalid
	if !errors.As(err, &inv) {
		return err
	}
	out := &errs.Invalid{}
	for _, f := range inv.Errors {
		if strings.HasPrefix(f.Field, "candidate.") {
			f.Field = "id"
			if target != "" {
				f.Field = "target"
				f.Message = "the version is not served on " + target + " where Curate can call it: deploy it there (to a staging alias, say) or name another target"
			}
		}
		out.Errors = append(out.Errors, f)
	}
	return out
}

// List reads the organisation's shadows, newest first; of one candidate
// when candidate is set.
func (s *Service) List(ctx context.Context, orgID uuid.UUID, candidate *uuid.UUID) ([]Shadow, error) {
	p := db.ShadowListParams{OrgID: orgID, RowLimit: MaxList}
	if candidate != nil {
		p.CandidateVersionID = uuid.NullUUID{UUID: *candidate, Valid: true}
	}
	rows, err := db.New(s.Pool).ShadowList(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]Shadow, len(rows))
	for i, r := range rows {
		out[i] = shadowOf(r)
	}
	return out, nil
}

func shadowOf(r db.ShadowListRow) Shadow {
	out := Shadow{ID: r.ID, Model: r.ModelName, Alias: r.Alias, CandidateVersionID: r.CandidateVersionID, CandidateVersion: r.CandidateVersion,
		Target: r.Target, Sample: r.Sample, Formula: r.Formula, Until: r.Until, Status: r.Status, StoppedReason: r.StoppedReason,
		StoppedAt: r.StoppedAt, Scored: r.Scored, Open: r.Open, Skipped: r.Skipped, Failed: r.Failed,
		JudgeCostUSD: pricing.Micros(r.CostMicros).Dollars(), CreatedBy: r.CreatedByLabel, CreatedAt: r.CreatedAt, Scorers: []string{}}
	var c eval.Config
	if json.Unmarshal(r.Config, &c) == nil {
		if set, err := scorers.Parse("scorers", c.Scorers); err == nil {
			out.Scorers = set.Names()
		}
	}
	return out
}

// Get reads one of the organisation's shadows.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Shadow, error) {
	rows, err := db.New(s.Pool).ShadowList(ctx, db.ShadowListParams{OrgID: orgID, ID: uuid.NullUUID{UUID: id, Valid: true}, RowLimit: 1})
	if err != nil {
		return Shadow{}, err
	}
	if len(rows) == 0 {
		return Shadow{}, errs.ErrNotFound
	}
	return shadowOf(rows[0]), nil
}

// Detail reads a shadow with its paired comparison, items filtered by one
// of eval.Filters ("" keeps all).
func (s *Service) Detail(ctx context.Context, orgID, id uuid.UUID, filter string) (Detail, error) {
	sh, err := s.Get(ctx, orgID, id)
	if err != nil {
		return Detail{}, err
	}
	pair, err := s.pair(ctx, orgID, id)
	if err != nil {
		return Detail{}, err
	}
	pair.A.VersionID, pair.B.VersionID = uuid.Nil, sh.CandidateVersionID
	kept := pair.Items[:0:0]
	for _, it := range pair.Items {
		if it.Keep(filter) {
			kept = append(kept, it)
		}
	}
	pair.Items = kept
	return Detail{Shadow: sh, Comparison: pair}, nil
}

// pair compares a shadow's scored queries: production's answer as A, the
// candidate's as B (eval.PairItems, as two versions are compared).
func (s *Service) pair(ctx context.Context, orgID, id uuid.UUID) (eval.VersionPair, error) {
	rows, err := db.New(s.Pool).ShadowQueryListScored(ctx, db.ShadowQueryListScoredParams{ShadowID: id, OrgID: orgID, RowLimit: MaxPaired})
	if err != nil {
		return eval.VersionPair{}, err
	}
	items := make([]eval.PairItem, len(rows))
	for i, r := range rows {
		it := eval.PairItem{SourceID: r.SourceID, Split: eval.SplitAll, Query: r.Query, Reference: r.Correction,
			A: eval.PairAnswer{Answer: r.Response, Critique: r.ProductionCritique, Safety: r.ProductionSafety, Invalid: r.ProductionInvalid,
				Scores: scoresOf(r.ProductionScores)},
			B: eval.PairAnswer{Answer: r.CandidateAnswer, Critique: r.CandidateCritique, Safety: r.CandidateSafety, Invalid: r.CandidateInvalid,
				Scores: scoresOf(r.CandidateScores)}}
		if r.ProductionReward.Valid {
			it.A.Reward = &r.ProductionReward.Float64
		}
		if r.CandidateReward.Valid {
			it.B.Reward = &r.CandidateReward.Float64
		}
		items[i] = it
	}
	margin := 0.1
	if s.Eval != nil {
		if g, ok, err := s.Eval.GetGate(ctx, orgID); err != nil {
			return eval.VersionPair{}, err
		} else if ok {
			margin = g.RegressionMargin
		}
	}
	return eval.PairItems(items, margin)
}

func scoresOf(raw []byte) map[string]scorers.Score {
	out := map[string]scorers.Score{}
	_ = json.Unmarshal(raw, &out)
	return out
}

// Stop stops a running shadow, audited: it samples no more queries, and
// those already sampled are still answered and scored.
func (s *Service) Stop(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, reason string) (Shadow, error) {
	v := &errs.Invalid{}
	v.Text("reason", reason, 500, false)
	if err := v.Err(); err != nil {
		return Shadow{}, err
	}
	if reason == "" {
		reason = "Stopped by " + actor.Label + "."
	}
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		n, err := q.ShadowUpdateStop(ctx, db.ShadowUpdateStopParams{OrgID: orgID, ID: id, Reason: reason})
		if err != nil {
			return err
		}
		if n == 0 {
			sh, err := s.Get(ctx, orgID, id)
			if err != nil {
				return err
			}
			return &errs.Conflict{Message: "The shadow is " + sh.Status + " already."}
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "shadow.stop", TargetType: "shadow", TargetID: id.String(),
			Details: map[string]any{"reason": reason}})
	})
	if err != nil {
		return Shadow{}, err
	}
	return s.Get(ctx, orgID, id)
}

// Evidence is the paired result of the candidate's newest shadow with a
// scored query; false when it has none.
func (s *Service) Evidence(ctx context.Context, orgID, versionID uuid.UUID) (Evidence, bool, error) {
	list, err := s.List(ctx, orgID, &versionID)
	if err != nil {
		return Evidence{}, false, err
	}
	for _, sh := range list {
		if sh.Scored == 0 {
			continue
		}
		pair, err := s.pair(ctx, orgID, sh.ID)
		if err != nil {
			return Evidence{}, false, err
		}
		if pair.Difference.N == 0 {
			continue
		}
		return Evidence{ShadowID: sh.ID, Alias: sh.Alias, Difference: pair.Difference}, true, nil
	}
	return Evidence{}, false, nil
}

// Sampled says whether a shadow samples a feedback item at its share.
func Sampled(shadow, feedback uuid.UUID, share float64) bool {
	return sampling.Sampled(shadow, feedback, share)
}

// SampleArgs asks for every running shadow to sample the queries that
// arrived.
type SampleArgs struct{}

// Kind names the job in River's table.
func (SampleArgs) Kind() string { return "shadow_sample" }

// RunArgs asks for a shadow's sampled queries to be mirrored and scored.
type RunArgs struct {
	ShadowID uuid.UUID `json:"shadow_id"`
}

// Kind names the job in River's table.
func (RunArgs) Kind() string { return "shadow_run" }

// InsertOpts keeps one run per shadow at a time.
func (RunArgs) InsertOpts() river.InsertOpts {
	return jobq.OnePerArgs()
}

// SampleAll samples the new queries of every running shadow, each on its
// own (a shadow past its until is stopped), and queues a run for each
// that sampled anything, or still has queries a run left.
func (s *Service) SampleAll(ctx context.Context) error {
	q := db.New(s.Pool)
	shadows, err := q.ShadowListRunning(ctx)
	if err != nil {
		return err
	}
	var failed []error
	for _, sh := range shadows {
		if sh.Until != nil && !s.now().Before(*sh.Until) {
			if _, err := q.ShadowUpdateStop(ctx, db.ShadowUpdateStopParams{OrgID: sh.OrgID, ID: sh.ID,
				Reason: "Its time ran out at " + sh.Until.UTC().Format(time.RFC3339) + "."}); err != nil {
				failed = append(failed, err)
			}
			continue
		}
		if err := s.sample(ctx, sh); err != nil {
			failed = append(failed, fmt.Errorf("shadow %s: %w", sh.ID, err))
		}
	}
	left, err := q.ShadowListWithOpen(ctx)
	if err != nil {
		return errors.Join(append(failed, err)...)
	}
	for _, id := range left {
		if err := s.queue(ctx, id); err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

func (s *Service) queue(ctx context.Context, id uuid.UUID) error {
	if s.Jobs == nil {
		return nil
	}
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, _ *db.Queries) error {
		_, err := s.Jobs.InsertTx(ctx, tx, RunArgs{ShadowID: id}, nil)
		return err
	})
}

// sample reads the feedback that arrived under the alias's version after
// the shadow's cursor, and the best-of-N calls that sampled the version
// after its call cursor (both up to Lag before now), records what its
// share samples as pending with the version that answered, moves the
// cursors and queues the shadow's run, in one transaction.
func (s *Service) sample(ctx context.Context, sh db.Shadow) error {
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		alias, err := q.ModelAliasGet(ctx, db.ModelAliasGetParams{OrgID: sh.OrgID, RegisteredModelID: sh.RegisteredModelID, Alias: sh.Alias})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // the alias is gone: nothing is answered under it
		}
		if err != nil {
			return err
		}
		if alias.VersionID == sh.CandidateVersionID {
			return nil // the candidate serves the alias itself now: nothing to mirror
		}
		names, err := q.ModelVersionListServedNames(ctx, db.ModelVersionListServedNamesParams{OrgID: sh.OrgID, VersionID: alias.VersionID})
		if err != nil || len(names) == 0 {
			return err
		}
		at, id := time.Time{}, uuid.Nil
		if sh.CursorAt != nil {
			at = *sh.CursorAt
		}
		if sh.CursorID.Valid {
			id = sh.CursorID.UUID
		}
		until, prod := s.now().Add(-Lag), uuid.NullUUID{UUID: alias.VersionID, Valid: true}
		rows, err := q.ShadowFeedbackList(ctx, db.ShadowFeedbackListParams{OrgID: sh.OrgID, Models: names, Until: until,
			CursorAt: at, CursorID: id, RowLimit: SampleBatch})
		if err != nil {
			return err
		}
		picked := 0
		if len(rows) > 0 {
			var ids []uuid.UUID
			for _, r := range rows {
				if Sampled(sh.ID, r.ID, sh.Sample) {
					ids = append(ids, r.ID)
				}
			}
			last := rows[len(rows)-1]
			if err := q.ShadowUpdateCursor(ctx, db.ShadowUpdateCursorParams{ID: sh.ID, CursorAt: &last.CreatedAt,
				CursorID: uuid.NullUUID{UUID: last.ID, Valid: true}}); err != nil {
				return err
			}
			if len(ids) > 0 {
				if _, err := q.ShadowQueryInsertPending(ctx, db.ShadowQueryInsertPendingParams{ShadowID: sh.ID, FeedbackIds: ids, OrgID: sh.OrgID,
					ProductionVersionID: prod}); err != nil {
					return err
				}
			}
			picked += len(ids)
		}
		// The best-of-N calls that sampled the alias's version.
		cat, cid := time.Time{}, uuid.Nil
		if sh.CallCursorAt != nil {
			cat = *sh.CallCursorAt
		}
		if sh.CallCursorID.Valid {
			cid = sh.CallCursorID.UUID
		}
		calls, err := q.ShadowSelectionList(ctx, db.ShadowSelectionListParams{OrgID: sh.OrgID, VersionID: prod, Until: until,
			CursorAt: cat, CursorID: cid, RowLimit: SampleBatch})
		if err != nil {
			return err
		}
		if len(calls) > 0 {
			var ids []uuid.UUID
			for _, c := range calls {
				if Sampled(sh.ID, c.ID, sh.Sample) {
					ids = append(ids, c.ID)
				}
			}
			last := calls[len(calls)-1]
			if err := q.ShadowUpdateCallCursor(ctx, db.ShadowUpdateCallCursorParams{ID: sh.ID, CursorAt: &last.CreatedAt,
				CursorID: uuid.NullUUID{UUID: last.ID, Valid: true}}); err != nil {
				return err
			}
			if len(ids) > 0 {
				if _, err := q.ShadowQueryInsertPendingCalls(ctx, db.ShadowQueryInsertPendingCallsParams{ShadowID: sh.ID, SelectionIds: ids,
					OrgID: sh.OrgID, ProductionVersionID: prod}); err != nil {
					return err
				}
			}
			picked += len(ids)
		}
		if picked == 0 || s.Jobs == nil {
			return nil
		}
		_, err = s.Jobs.InsertTx(ctx, tx, RunArgs{ShadowID: sh.ID}, nil)
		return err
	})
}

// Reasons a query has no comparison.
const (
	lostAsk   = "The worker stopped while the candidate was answering and its answer was lost: a query is never sent to the candidate twice."
	lostScore = "The worker stopped while the answers were being scored and the scores were lost: a query is never sent to the judge twice."
)

// Run mirrors a shadow's open queries, one at a time: each is claimed (so
// that two runs never work on one), asked_at is recorded before the
// candidate is asked and its answer stored before anything is scored,
// scoring_at recorded before the scorers are asked and both scorings
// stored together. A query found begun by a worker that stopped is
// failed with the reason rather than asked again. A spent judge budget
// skips what is left, with the budget's words; a candidate that cannot
// answer fails its query with the reason.
func (s *Service) Run(ctx context.Context, shadowID uuid.UUID) error {
	q := db.New(s.Pool)
	sh, err := q.ShadowGetForRun(ctx, shadowID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // deleted with its model
	}
	if err != nil {
		return err
	}
	var stored eval.Config
	if err := json.Unmarshal(sh.Config, &stored); err != nil {
		return fmt.Errorf("shadow %s: its configuration: %w", sh.ID, err)
	}
	cfg := config(stored)
	cand := sh.CandidateVersionID
	cfg.Candidate = eval.Candidate{ModelVersionID: &cand, Target: sh.Target}
	cfg.Purpose = "shadow of " + sh.ID.String()
	var plan *eval.Plan
	for {
		rows, err := q.ShadowQueryListOpen(ctx, db.ShadowQueryListOpenParams{ShadowID: shadowID, RowLimit: RunBatch})
		if err != nil || len(rows) == 0 {
			return err
		}
		if plan == nil {
			p, err := s.Eval.Runner.Prepare(ctx, sh.OrgID, cfg, nil)
			if err != nil {
				// The candidate is served nowhere now: what is open waits
				// for the next run.
				return fmt.Errorf("shadow %s: %w", sh.ID, err)
			}
			plan = &p
		}
		for _, r := range rows {
			if err := ctx.Err(); err != nil {
				return err
			}
			done, err := s.one(ctx, q, sh, *plan, r)
			if err != nil || done {
				return err
			}
		}
	}
}

// one carries a query through its steps; done is true when the run is to
// stop (the budget is spent).
func (s *Service) one(ctx context.Context, q *db.Queries, sh db.Shadow, plan eval.Plan, r db.ShadowQueryListOpenRow) (done bool, err error) {
	key := r.ID
	claimed, err := q.ShadowQueryUpdateClaim(ctx, r.ID)
	if err != nil || len(claimed) == 0 {
		return false, err // another run took it
	}
	c := claimed[0]
	fail := func(reason string) error {
		return q.ShadowQueryUpdateFailed(ctx, db.ShadowQueryUpdateFailedParams{ID: r.ID, Reason: reason})
	}
	switch {
	case c.Status == QueryPending && c.AskedAt != nil:
		return false, fail(lostAsk)
	case c.Status == QueryAnswered && c.ScoringAt != nil:
		return false, fail(lostScore)
	}
	if plan.Ready != nil {
		var pause *eval.Pause
		if err := plan.Ready(ctx); errors.As(err, &pause) {
			return true, s.skip(ctx, q, sh.ID, key, pause.Reason)
		} else if err != nil {
			return false, errors.Join(err, q.ShadowQueryUpdateRelease(context.WithoutCancel(ctx), key))
		}
	}
	it := eval.Item{SourceID: r.ID, Split: eval.SplitAll, Query: r.Query, Reference: r.Correction,
		Messages: []export.Message{{Role: "user", Content: r.Query}}, Context: documents(r.Context)}
	answer := r.CandidateAnswer
	if c.Status == QueryPending {
		if err := q.ShadowQueryUpdateAsked(ctx, r.ID); err != nil {
			return false, err
		}
		a, err := plan.Answerer.Answer(ctx, it)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, fail("The candidate could not answer: " + outbound.Describe(err))
		}
		answer = a.Text
		if err := q.ShadowQueryUpdateAnswered(ctx, db.ShadowQueryUpdateAnsweredParams{ID: r.ID, CandidateAnswer: a.Text, CandidateLatencyMs: int32(a.Latency.Milliseconds()), PromptTokens: a.PromptTokens,
			CompletionTokens: a.CompletionTokens}); err != nil {
			return false, err
		}
	}
	if err := q.ShadowQueryUpdateScoring(ctx, r.ID); err != nil {
		return false, err
	}
	prod, err := plan.Scorer.Score(ctx, it, r.Response)
	var cand eval.Scored
	if err == nil {
		cand, err = plan.Scorer.Score(ctx, it, answer)
	}
	var pause *eval.Pause
	if errors.As(err, &pause) {
		// The budget refused before asking: nothing was sent for the
		// part refused, so the query may be scored later.
		return true, s.skip(ctx, q, sh.ID, key, pause.Reason)
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fail("The answers could not be scored: " + err.Error())
	}
	u := db.ShadowQueryUpdateScoredParams{ID: r.ID,
		ProductionInvalid: prod.Invalid, ProductionCritique: prod.Critique, ProductionSafety: prod.Safety,
		CandidateInvalid: cand.Invalid, CandidateCritique: cand.Critique, CandidateSafety: cand.Safety,
		JudgeCalls: int32(prod.JudgeCalls + cand.JudgeCalls), JudgeCostMicros: int64(prod.JudgeCost + cand.JudgeCost)}
	if u.ProductionScores, err = json.Marshal(prod.Components); err != nil {
		return false, err
	}
	if u.CandidateScores, err = json.Marshal(cand.Components); err != nil {
		return false, err
	}
	if prod.Reward != nil {
		u.ProductionReward = pgtype.Float8{Float64: *prod.Reward, Valid: true}
	}
	if cand.Reward != nil {
		u.CandidateReward = pgtype.Float8{Float64: *cand.Reward, Valid: true}
	}
	return false, q.ShadowQueryUpdateScored(ctx, u)
}

// skip releases the query at hand (its scoring_at cleared: the budget
// refused before any call) and skips what is left open, with the reason.
func (s *Service) skip(ctx context.Context, q *db.Queries, shadowID, key uuid.UUID, reason string) error {
	if err := q.ShadowQueryUpdateRelease(ctx, key); err != nil {
		return err
	}
	_, err := q.ShadowQueryUpdateSkipped(ctx, db.ShadowQueryUpdateSkippedParams{ShadowID: shadowID, Reason: reason})
	return err
}

// documents are the documents of a query's context object (its
// "documents" list), for the RAG metrics.
func documents(raw []byte) []string {
	var c struct {
		Documents json.RawMessage `json:"documents"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return nil
	}
	return scorers.Documents(c.Documents)
}
