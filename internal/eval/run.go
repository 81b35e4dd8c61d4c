package eval

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/leak"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/stats"
	"golang.org/x/sync/errgroup"
)

// EvaluateArgs asks a worker to carry an evaluation run out.
type EvaluateArgs struct {
	RunID uuid.UUID `json:"run_id"`
}

// Kind names the job in River's table.
func (EvaluateArgs) Kind() string { return "evaluation_run" }

// KindAliases keeps the jobs queued under the kind's earlier name worked;
// it can go once no row of river_job has that kind.
func (EvaluateArgs) KindAliases() []string { return []string{"evaluation"} }

// Answerer gives a candidate's answer to one item.
type Answerer interface {
	Answer(ctx context.Context, it Item) (Answer, error)
}

// Answer is a candidate's answer with what it cost.
type Answer struct {
	Text                           string
	PromptTokens, CompletionTokens int64
	Cost                           pricing.Micros
	Latency                        time.Duration
}

// Scorer scores one answer.
type Scorer interface {
	Score(ctx context.Context, it Item, answer string) (Scored, error)
}

// Scored is one answer's scores: each component in 0–1, and the reward
// they make, or the reason there is none (never a number standing in for
// one).
type Scored struct {
	Components        map[string]scorers.Score
	Reward            *float64
	RewardExplanation string
	Invalid           string
	Critique          string
	Safety            bool
	JudgeCalls        int
	JudgeCost         pricing.Micros
}

// Pause is an error that stops a run where it is, with a reason a person
// can act on (a budget spent): the items scored so far stay, and nothing
// is half-counted.
type Pause struct{ Reason string }

func (p *Pause) Error() string { return p.Reason }

// Runner turns a run's configuration into what answers and what scores.
// Runs is the one the product uses; tests may script their own.
type Runner interface {
	// Check refuses a configuration that cannot run, field by field, and
	// returns it completed (scorers and formula resolved).
	Check(ctx context.Context, orgID uuid.UUID, cfg Config) (Config, error)
	// Prepare is given every item of the version (a leak check indexes
	// them all, whatever the number it asks).
	Prepare(ctx context.Context, orgID uuid.UUID, cfg Config, items []Item) (Plan, error)
}

// Plan is what carries a run out: what answers, what scores, and how many
// items are worked on at once.
type Plan struct {
	Answerer    Answerer
	Scorer      Scorer
	Concurrency int
	// Ready, when set, is asked before each item: a Pause from it stops
	// the run before the candidate is asked.
	Ready func(ctx context.Context) error
}

// Config is what a run asks and how it scores, as the API takes it.
// Scorers left out are the reward formula's; the formula left out is the
// organisation's newest "default" version. Start writes the formula it
// resolved back into the run's stored configuration, so a report always
// shows the weights it was computed with.
type Config struct {
	GoldenSetVersionID uuid.UUID        `json:"golden_set_version_id"`
	Candidate          Candidate        `json:"candidate"`
	Judge              *JudgeConfig     `json:"judge,omitempty"`
	Scorers            []scorers.Config `json:"scorers,omitempty"`
	RewardFormula      json.RawMessage  `json:"reward_formula,omitempty"`
	// Formula is the formula as resolved at the start, written out
	// ("R = 1·judge"); set by Start.
	Formula string `json:"formula,omitempty"`
	// LeakCheck, when set, makes the run a leak check instead: the model
	// version is asked prompts of its own training data (its dataset
	// version, unless golden_set_version_id names another), and an answer
	// that repeats MinWords words of a training answer verbatim, or training
	// personal data, is flagged. It needs no judge, scorers or formula.
	LeakCheck *LeakCheck `json:"leak_check,omitempty"`
	// Purpose is what the judge's calls are recorded for; the golden set's
	// evaluation when empty. Never taken from a request.
	Purpose string `json:"-"`
}

// LeakCheck configures a leak check.
type LeakCheck struct {
	// MinWords is the shortest verbatim run that counts (default 50).
	MinWords int `json:"min_words,omitempty"`
	// Items is how many training prompts are asked (default 100).
	Items int `json:"items,omitempty"`
}

// Kinds of run.
const (
	KindQuality = "quality"
	KindLeak    = "leak"
)

// Limits of a leak check.
const (
	DefaultLeakItems = 100
	MaxLeakItems     = 5000
)

// limit caps a leak check's items at the number it asks: the first ones in
// the version's stable order, the same at the start and on every resume.
func (c Config) limit(items []Item) []Item {
	if c.LeakCheck != nil && len(items) > c.LeakCheck.Items {
		return items[:c.LeakCheck.Items]
	}
	return items
}

// JudgeConfig names the judge: an endpoint and a template ("" is
// "default").
type JudgeConfig struct {
	Endpoint string `json:"endpoint"`
	Template string `json:"template,omitempty"`
	// Embeddings names the endpoint that embeds text, for the
	// answer_relevancy metric.
	Embeddings string `json:"embeddings_endpoint,omitempty"`
}

// Candidate is what answers: a registered model version, or an endpoint
// by name.
type Candidate struct {
	ModelVersionID *uuid.UUID `json:"model_version_id,omitempty"`
	Endpoint       string     `json:"endpoint,omitempty"`
	// Target names the serving target a model version is called on; any
	// target serving it when empty.
	Target string `json:"target,omitempty"`
}

// Start records a run and queues its job, in one transaction.
func (s *Service) Start(ctx context.Context, actor audit.Actor, orgID uuid.UUID, cfg Config) (db.EvaluationRun, error) {
	v := &errs.Invalid{}
	if (cfg.Candidate.ModelVersionID == nil) == (cfg.Candidate.Endpoint == "") {
		v.Add("candidate", "name a model_version_id or an endpoint, one of the two")
	}
	kind := KindQuality
	if lc := cfg.LeakCheck; lc != nil {
		kind = KindLeak
		if cfg.Candidate.ModelVersionID == nil {
			v.Add("candidate.model_version_id", "is required for a leak check: the version whose training data is checked")
		} else if cfg.GoldenSetVersionID == uuid.Nil {
			trained, err := s.trainedOn(ctx, orgID, *cfg.Candidate.ModelVersionID)
			if err != nil {
				return db.EvaluationRun{}, err
			}
			if trained == uuid.Nil {
				v.Add("golden_set_version_id", "is required: the version records no training data, so name the frozen version it was trained on")
			}
			cfg.GoldenSetVersionID = trained
		}
		lc.MinWords, lc.Items = cmp.Or(lc.MinWords, leak.DefaultMinWords), cmp.Or(lc.Items, DefaultLeakItems)
		if lc.MinWords < 8 || lc.MinWords > 1000 {
			v.Add("leak_check.min_words", "must be 8 to 1000")
		}
		if lc.Items < 1 || lc.Items > MaxLeakItems {
			v.Add("leak_check.items", "must be 1 to %d", MaxLeakItems)
		}
	} else if cfg.GoldenSetVersionID == uuid.Nil {
		v.Add("golden_set_version_id", "is required: a frozen dataset version")
	}
	if err := v.Err(); err != nil {
		return db.EvaluationRun{}, err
	}
	if s.Runner == nil {
		return db.EvaluationRun{}, &errs.Conflict{Message: "Evaluations cannot run here: no runner is configured."}
	}
	cfg, err := s.Runner.Check(ctx, orgID, cfg)
	if err != nil {
		return db.EvaluationRun{}, err
	}
	items, err := s.Items(ctx, orgID, cfg.GoldenSetVersionID, nil)
	if err != nil {
		return db.EvaluationRun{}, err
	}
	if len(items) == 0 {
		return db.EvaluationRun{}, errs.InvalidField("golden_set_version_id", "has no item with a question to ask")
	}
	items = cfg.limit(items)
	raw, err := json.Marshal(cfg)
	if err != nil {
		return db.EvaluationRun{}, err
	}
	var out db.EvaluationRun
	err = db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		p := db.EvaluationRunInsertParams{OrgID: orgID, Kind: kind, GoldenSetVersionID: cfg.GoldenSetVersionID, CandidateEndpoint: cfg.Candidate.Endpoint,
			Config: raw, Total: int32(len(items)), CreatedByLabel: actor.Label}
		if id := cfg.Candidate.ModelVersionID; id != nil {
			if _, err := q.ModelVersionGetForUpdate(ctx, db.ModelVersionGetForUpdateParams{OrgID: orgID, ID: *id}); errors.Is(err, pgx.ErrNoRows) {
				return errs.InvalidField("candidate.model_version_id", "is not a model version of this organisation")
			} else if err != nil {
				return err
			}
			p.CandidateVersionID = uuid.NullUUID{UUID: *id, Valid: true}
		}
		if out, err = q.EvaluationRunInsert(ctx, p); err != nil {
			return err
		}
		job, err := s.Jobs.InsertTx(ctx, tx, EvaluateArgs{RunID: out.ID}, nil)
		if err != nil {
			return err
		}
		if err := q.EvaluationRunUpdateRiverID(ctx, db.EvaluationRunUpdateRiverIDParams{ID: out.ID, RiverJobID: pgtype.Int8{Int64: job.Job.ID, Valid: true}}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "evaluation.start", TargetType: "evaluation_run",
			TargetID: out.ID.String(), Details: map[string]any{"golden_set_version_id": cfg.GoldenSetVersionID.String(), "items": len(items)}})
	})
	return out, err
}

// Advance carries a run out: each item not yet stored is answered,
// scored and stored with the run's counts in one transaction, so a worker
// killed mid-run resumes at the next item and never pays twice for one.
// A Pause stops the run with its reason; the aggregate is written once
// every item is stored.
func (s *Service) Advance(ctx context.Context, runID uuid.UUID) error {
	q := db.New(s.Pool)
	run, err := q.EvaluationRunGetByID(ctx, runID)
	if err != nil {
		return err
	}
	if run.Status == db.EvaluationStatusSucceeded || run.Status == db.EvaluationStatusFailed {
		return nil
	}
	var cfg Config
	if err := json.Unmarshal(run.Config, &cfg); err != nil {
		return fmt.Errorf("evaluation %s: config: %w", runID, err)
	}
	tags := []string{}
	if g, err := q.GoldenSetGet(ctx, db.GoldenSetGetParams{OrgID: run.OrgID, VersionID: run.GoldenSetVersionID}); err == nil {
		tags = g.SplitTags
	}
	all, err := s.Items(ctx, run.OrgID, run.GoldenSetVersionID, tags)
	if err != nil {
		return err
	}
	items := cfg.limit(all)
	stored, err := q.EvaluationItemListIDs(ctx, runID)
	if err != nil {
		return err
	}
	seen := make(map[uuid.UUID]bool, len(stored))
	for _, id := range stored {
		seen[id] = true
	}
	if err := q.EvaluationRunUpdateStatus(ctx, db.EvaluationRunUpdateStatusParams{ID: runID, Status: db.EvaluationStatusRunning}); err != nil {
		return err
	}
	if s.Runner == nil {
		return errors.New("evaluation: no runner is configured")
	}
	plan, err := s.Runner.Prepare(ctx, run.OrgID, cfg, all)
	if err != nil {
		return err
	}
	// Items are worked on Concurrency at a time, each stored as soon as it
	// is scored. After a Pause no new item starts; those in flight finish
	// and are stored (nothing they paid for is thrown away), unless they
	// meet the Pause too, in which case they store nothing.
	var g errgroup.Group
	g.SetLimit(max(plan.Concurrency, 1))
	var stop atomic.Bool
	for _, it := range items {
		if seen[it.SourceID] {
			continue
		}
		if stop.Load() || ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			err := s.evaluateItem(ctx, runID, plan, it)
			if err != nil {
				stop.Store(true)
			}
			return err
		})
	}
	err = g.Wait()
	var pause *Pause
	switch {
	case errors.As(err, &pause):
		return s.pause(ctx, runID, pause.Reason)
	case err != nil:
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return s.finish(ctx, runID)
}

// evaluateItem answers, scores and stores one item. A failure to answer
// or score (after the client's retries) is stored as invalid with its
// reason, never as a score; a Pause or a cancelled context stores nothing.
func (s *Service) evaluateItem(ctx context.Context, runID uuid.UUID, plan Plan, it Item) error {
	row := db.EvaluationItemInsertParams{RunID: runID, SourceID: it.SourceID, Split: it.Split, Query: it.Query, Reference: it.Reference}
	var scored Scored
	// Scoring may be refused before anything is paid for (a judge budget
	// already spent): the candidate is not asked either.
	if plan.Ready != nil {
		if err := plan.Ready(ctx); err != nil {
			return err
		}
	}
	answer, err := plan.Answerer.Answer(ctx, it)
	row.Answer, row.PromptTokens, row.CompletionTokens = answer.Text, answer.PromptTokens, answer.CompletionTokens
	row.AnswerCostMicros, row.LatencyMs = int64(answer.Cost), int32(answer.Latency/time.Millisecond)
	if err == nil {
		scored, err = plan.Scorer.Score(ctx, it, answer.Text)
	}
	var pause *Pause
	switch {
	case errors.As(err, &pause):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		scored.Invalid = outbound.Describe(err)
	}
	return s.storeItem(ctx, row, scored)
}

func (s *Service) storeItem(ctx context.Context, row db.EvaluationItemInsertParams, sc Scored) error {
	if sc.Components == nil {
		sc.Components = map[string]scorers.Score{}
	}
	scores, err := json.Marshal(sc.Components)
	if err != nil {
		return err
	}
	row.Scores, row.InvalidReason, row.Critique, row.SafetyFlag = scores, sc.Invalid, sc.Critique, sc.Safety
	row.RewardExplanation = sc.RewardExplanation
	if sc.Reward != nil && sc.Invalid == "" {
		row.Reward = pgtype.Float8{Float64: *sc.Reward, Valid: true}
	} else if row.InvalidReason == "" {
		row.InvalidReason = "No reward: a component of the formula has no score."
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		n, err := q.EvaluationItemInsert(ctx, row)
		if err != nil || n == 0 {
			return err // stored by an earlier attempt: counted then
		}
		return q.EvaluationRunUpdateProgress(ctx, db.EvaluationRunUpdateProgressParams{ID: row.RunID, JudgeCalls: int32(sc.JudgeCalls),
			JudgeCostMicros: int64(sc.JudgeCost), AnswerCostMicros: row.AnswerCostMicros, Invalid: row.InvalidReason != ""})
	})
}

func (s *Service) pause(ctx context.Context, runID uuid.UUID, reason string) error {
	return db.New(s.Pool).EvaluationRunUpdatePaused(ctx, db.EvaluationRunUpdatePausedParams{ID: runID, PausedReason: reason})
}

// finish writes the aggregate: the mean reward over the items that have
// one and its bootstrap confidence interval. A quality run of a model
// version leaves its summary on the version, in the same transaction.
func (s *Service) finish(ctx context.Context, runID uuid.UUID) error {
	q := db.New(s.Pool)
	rewards, err := q.EvaluationItemListRewards(ctx, runID)
	if err != nil {
		return err
	}
	p := db.EvaluationRunUpdateFinishedParams{ID: runID}
	mean, ci, err := meanCI(rewards)
	if err != nil {
		return err
	}
	if mean != nil {
		p.MeanReward = pgtype.Float8{Float64: *mean, Valid: true}
	}
	if ci != nil {
		p.CiLow, p.CiHigh = pgtype.Float8{Float64: ci[0], Valid: true}, pgtype.Float8{Float64: ci[1], Valid: true}
	}
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		if err := q.EvaluationRunUpdateFinished(ctx, p); err != nil {
			return err
		}
		run, err := q.EvaluationRunGetByID(ctx, runID)
		if err != nil || run.Kind != KindQuality || !run.CandidateVersionID.Valid {
			return err
		}
		e, err := s.summary(ctx, q, run)
		if err != nil {
			return err
		}
		return models.SetEvaluationTx(ctx, tx, run.OrgID, run.CandidateVersionID.UUID, e)
	})
}

// meanCI is the mean of rewards and its 95% bootstrap interval: no mean
// from none, no interval from one.
func meanCI(rewards []float64) (*float64, []float64, error) {
	switch len(rewards) {
	case 0:
		return nil, nil, nil
	case 1:
		return &rewards[0], nil, nil
	}
	mean, ci, err := stats.MeanCI(rewards, stats.DefaultBootstrap)
	if err != nil {
		return nil, nil, err
	}
	return &mean, []float64{ci.Lo, ci.Hi}, nil
}

// summary is a finished run as its version keeps it.
func (s *Service) summary(ctx context.Context, q *db.Queries, run db.EvaluationRun) (models.Evaluation, error) {
	named, err := q.EvaluationRunGetWithNames(ctx, db.EvaluationRunGetWithNamesParams{OrgID: run.OrgID, ID: run.ID})
	if err != nil {
		return models.Evaluation{}, err
	}
	set, err := q.DatasetVersionGet(ctx, db.DatasetVersionGetParams{OrgID: run.OrgID, ID: run.GoldenSetVersionID})
	if err != nil {
		return models.Evaluation{}, err
	}
	var cfg Config
	if err := json.Unmarshal(run.Config, &cfg); err != nil {
		return models.Evaluation{}, err
	}
	out := models.Evaluation{RunID: run.ID, GoldenSetVersionID: run.GoldenSetVersionID, GoldenSet: named.GoldenSetName,
		GoldenSetHash: set.ContentHash, Items: int(run.Done), Invalid: int(run.Invalid), JudgeCalls: int(run.JudgeCalls),
		JudgeCostUSD: pricing.Micros(run.JudgeCostMicros).Dollars(), AnswerCostUSD: pricing.Micros(run.AnswerCostMicros).Dollars(),
		Formula: cfg.Formula, Splits: []models.EvaluationSplit{}}
	if run.FinishedAt != nil {
		out.FinishedAt = *run.FinishedAt
	}
	if run.MeanReward.Valid {
		out.MeanReward = &run.MeanReward.Float64
	}
	if run.CiLow.Valid && run.CiHigh.Valid {
		out.CI = []float64{run.CiLow.Float64, run.CiHigh.Float64}
	}
	items, err := q.EvaluationItemListForSummary(ctx, run.ID)
	if err != nil {
		return models.Evaluation{}, err
	}
	rewards := map[string][]float64{}
	var latency, answered float64
	for _, it := range items {
		if len(out.Splits) == 0 || out.Splits[len(out.Splits)-1].Split != it.Split {
			out.Splits = append(out.Splits, models.EvaluationSplit{Split: it.Split})
		}
		out.Splits[len(out.Splits)-1].Items++
		if it.Reward.Valid {
			rewards[it.Split] = append(rewards[it.Split], it.Reward.Float64)
		}
		if it.Answered {
			latency, answered = latency+float64(it.LatencyMs), answered+1
		}
	}
	for i, sp := range out.Splits {
		if out.Splits[i].MeanReward, out.Splits[i].CI, err = meanCI(rewards[sp.Split]); err != nil {
			return models.Evaluation{}, err
		}
	}
	// The red-team split last, as reports show it.
	slices.SortStableFunc(out.Splits, func(a, b models.EvaluationSplit) int {
		return cmp.Compare(b2i(a.Split == RedTeam), b2i(b.Split == RedTeam))
	})
	if answered > 0 {
		m := latency / answered
		out.MeanLatencyMS = &m
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Fail ends a run that cannot go on, with the reason in words.
func (s *Service) Fail(ctx context.Context, runID uuid.UUID, cause error) error {
	return db.New(s.Pool).EvaluationRunUpdateFailed(ctx, db.EvaluationRunUpdateFailedParams{ID: runID, Error: outbound.Describe(cause)})
}

// Run is a run as the API shows it.
type Run struct {
	ID       uuid.UUID `json:"id"`
	Status   string    `json:"status"`
	Progress struct {
		Done  int `json:"done"`
		Total int `json:"total"`
	} `json:"progress"`
	Summary struct {
		MeanReward    *float64   `json:"mean_reward"`
		CI            []float64  `json:"ci"`
		Invalid       int        `json:"invalid"`
		JudgeCalls    int        `json:"judge_calls"`
		JudgeCostUSD  float64    `json:"judge_cost_usd"`
		AnswerCostUSD float64    `json:"answer_cost_usd"`
		Formula       string     `json:"formula"`
		PausedReason  string     `json:"paused_reason,omitempty"`
		Error         string     `json:"error,omitempty"`
		FinishedAt    *time.Time `json:"finished_at"`
	} `json:"summary"`
	Items []RunItem `json:"items"`
	// Splits are the mean rewards per split, red team last.
	Splits []SplitResult `json:"-"`
	Kind   string        `json:"kind"`
	// jobID is the River job carrying the run on (0 for none).
	jobID int64
}

// RunItem is one answered item of a run.
type RunItem struct {
	SourceID          uuid.UUID                `json:"source_id"`
	Split             string                   `json:"split"`
	Query             string                   `json:"query"`
	Reference         string                   `json:"reference"`
	Answer            string                   `json:"answer"`
	Scores            map[string]scorers.Score `json:"scores"`
	Reward            *float64                 `json:"reward"`
	RewardExplanation string                   `json:"reward_explanation,omitempty"`
	CostUSD           float64                  `json:"answer_cost_usd"`
	LatencyMS         int                      `json:"latency_ms"`
	Invalid           string                   `json:"invalid,omitempty"`
	Critique          string                   `json:"critique,omitempty"`
	Safety            bool                     `json:"safety_flag"`
}

// GetRun returns a run of the organisation with its items.
func (s *Service) GetRun(ctx context.Context, orgID, runID uuid.UUID) (Run, error) {
	q := db.New(s.Pool)
	r, err := q.EvaluationRunGet(ctx, db.EvaluationRunGetParams{OrgID: orgID, ID: runID})
	if err != nil {
		return Run{}, errs.NotFound(err)
	}
	out := Run{ID: r.ID, Status: string(r.Status), Kind: r.Kind, Items: []RunItem{}, jobID: r.RiverJobID.Int64}
	out.Progress.Done, out.Progress.Total = int(r.Done), int(r.Total)
	out.Summary.Invalid, out.Summary.JudgeCalls = int(r.Invalid), int(r.JudgeCalls)
	out.Summary.JudgeCostUSD = pricing.Micros(r.JudgeCostMicros).Dollars()
	out.Summary.AnswerCostUSD = pricing.Micros(r.AnswerCostMicros).Dollars()
	var cfg Config
	if err := json.Unmarshal(r.Config, &cfg); err == nil {
		out.Summary.Formula = cfg.Formula
	}
	out.Summary.PausedReason, out.Summary.Error, out.Summary.FinishedAt = r.PausedReason, r.Error, r.FinishedAt
	if r.MeanReward.Valid {
		out.Summary.MeanReward = &r.MeanReward.Float64
	}
	if r.CiLow.Valid {
		out.Summary.CI = []float64{r.CiLow.Float64, r.CiHigh.Float64}
	}
	items, err := q.EvaluationItemList(ctx, runID)
	if err != nil {
		return Run{}, err
	}
	for _, it := range items {
		ri := RunItem{SourceID: it.SourceID, Split: it.Split, Query: it.Query, Reference: it.Reference, Answer: it.Answer,
			Invalid: it.InvalidReason, Critique: it.Critique, Safety: it.SafetyFlag, RewardExplanation: it.RewardExplanation,
			CostUSD: pricing.Micros(it.AnswerCostMicros).Dollars(), LatencyMS: int(it.LatencyMs)}
		if err := json.Unmarshal(it.Scores, &ri.Scores); err != nil {
			return Run{}, err
		}
		if it.Reward.Valid {
			ri.Reward = &it.Reward.Float64
		}
		out.Items = append(out.Items, ri)
	}
	out.Splits = splitMeans(out.Items)
	return out, nil
}

// splitMeans is each split's mean reward over the items that have one.
func splitMeans(items []RunItem) []SplitResult {
	var out []SplitResult
	sums := map[string][2]float64{}
	for _, it := range items {
		i := slices.IndexFunc(out, func(r SplitResult) bool { return r.Split == it.Split })
		if i < 0 {
			out = append(out, SplitResult{Split: it.Split})
			i = len(out) - 1
		}
		out[i].Items++
		if it.Reward != nil {
			s := sums[it.Split]
			sums[it.Split] = [2]float64{s[0] + *it.Reward, s[1] + 1}
		}
	}
	for i := range out {
		if s := sums[out[i].Split]; s[1] > 0 {
			m := s[0] / s[1]
			out[i].CandidateMean = &m
		}
	}
	slices.SortFunc(out, func(a, b SplitResult) int {
		switch {
		case a.Split == b.Split:
			return 0
		case a.Split == RedTeam:
			return 1
		case b.Split == RedTeam:
			return -1
		case a.Split < b.Split:
			return -1
		}
		return 1
	})
	return out
}

// trainedOn is the dataset version a model version was trained on, or
// uuid.Nil.
func (s *Service) trainedOn(ctx context.Context, orgID, versionID uuid.UUID) (uuid.UUID, error) {
	v, err := db.New(s.Pool).ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: versionID})
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, errs.InvalidField("candidate.model_version_id", "is not a model version of this organisation")
	}
	if err != nil {
		return uuid.Nil, err
	}
	return v.ModelVersion.DatasetVersionID.UUID, nil
}

// Resume carries a run that has not finished on: a paused one (after its
// budget was raised, say) or one whose worker stopped (killed while it
// ran). It goes on at the next item not stored, and no item is paid for
// twice. A run whose job is queued or running in a live worker needs no
// resuming, and one that finished cannot be.
func (s *Service) Resume(ctx context.Context, actor audit.Actor, orgID, runID uuid.UUID) error {
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		run, err := q.EvaluationRunGetForUpdate(ctx, db.EvaluationRunGetForUpdateParams{OrgID: orgID, ID: runID})
		if err != nil {
			return errs.NotFound(err)
		}
		if run.Status == db.EvaluationStatusSucceeded || run.Status == db.EvaluationStatusFailed {
			return &errs.Conflict{Message: "This evaluation has finished: start a new one to evaluate again."}
		}
		var jobID int64
		if run.Status == db.EvaluationStatusPaused || !run.RiverJobID.Valid {
			// A paused run's job has ended, or is ending now.
			job, err := s.Jobs.InsertTx(ctx, tx, EvaluateArgs{RunID: runID}, nil)
			if err != nil {
				return err
			}
			jobID = job.Job.ID
		} else if jobID, err = jobq.Revive(ctx, tx, s.Jobs, run.RiverJobID.Int64, EvaluateArgs{RunID: runID}); errors.Is(err, jobq.ErrLive) {
			return &errs.Conflict{Message: "This evaluation is under way: its worker carries it on."}
		} else if err != nil {
			return err
		}
		if err := q.EvaluationRunUpdateResumed(ctx, db.EvaluationRunUpdateResumedParams{OrgID: orgID, ID: runID,
			RiverJobID: pgtype.Int8{Int64: jobID, Valid: true}}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "evaluation.resume", TargetType: "evaluation_run",
			TargetID: runID.String(), Details: map[string]any{"status": string(run.Status)}})
	})
}

// Abandon pauses a run whose job was given up, with the reason: what it
// scored stays, and resuming it goes on from there.
func (s *Service) Abandon(ctx context.Context, runID uuid.UUID, reason string) error {
	return s.pause(ctx, runID, reason)
}

// Stalled reports whether a run that has not finished has no job carrying
// it on: paused, or its worker stopped. An admin can resume it.
func (s *Service) Stalled(ctx context.Context, r Run) (bool, error) {
	switch r.Status {
	case string(db.EvaluationStatusPaused):
		return true, nil
	case string(db.EvaluationStatusQueued), string(db.EvaluationStatusRunning):
	default:
		return false, nil
	}
	return jobq.Stalled(ctx, db.New(s.Pool), r.jobID)
}
