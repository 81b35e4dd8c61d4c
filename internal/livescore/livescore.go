// Package livescore scores live answers in the background: per experiment,
// or per alias of a registered model (production), a sampling rate at
// which answers that arrive as feedback are scored by a scorer, a judge
// template through an endpoint now. Feedback ingest is left alone: a
// periodic job reads the feedback that arrived since each scorer's cursor,
// samples it by a hash of the scorer and the feedback's id, and queues a
// scoring job for what it sampled; that job scores one answer at a time,
// recording each score before asking for the next, through the judge's
// public methods (cached, costed and within the organisation's judge
// budget). The scores are the experiments' avg_judge_score metric, and
// their safety flags the experiments' incidents.
package livescore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
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
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/sampling"
	"github.com/curate/curate/internal/scorers"
)

// Scorer scores one sampled answer: with a judge template's grade, or a
// RAG metric's verdicts (JudgeScorer); a reward model is the next, behind
// the same method.
type Scorer interface {
	Score(ctx context.Context, orgID uuid.UUID, s Config, in scorers.Input) (Result, error)
}

// Result is one answer's score, or why there is none (Invalid), with the
// calls it took and what they cost.
type Result struct {
	Score   float64
	Safety  bool
	Invalid string
	Calls   int
	Cost    pricing.Micros
}

// ErrBudget is a score refused because the organisation's scoring budget
// is spent: what is left to score is skipped.
var ErrBudget = errors.New("live scoring: budget spent")

// JudgeScorer scores with a judge template through its endpoint.
type JudgeScorer struct {
	Judge *judge.Service
}

// Score asks the judge for its grade, or for a RAG metric's verdicts on
// the answer's context documents; its cache answers an answer already
// judged the same way without a call.
func (j JudgeScorer) Score(ctx context.Context, orgID uuid.UUID, s Config, in scorers.Input) (Result, error) {
	var jd judge.Judgement
	var err error
	if s.Scorer != "" && s.Scorer != ScorerJudge {
		jd, err = j.Judge.RAG(ctx, orgID, judge.RAGRequest{Metric: s.Scorer, Endpoint: s.Endpoint, Embeddings: s.Embeddings, Input: in,
			Purpose: "live scoring"})
	} else {
		jd, err = j.Judge.Judge(ctx, orgID, judge.Request{Endpoint: s.Endpoint, Template: s.Template, Input: in, Purpose: "live scoring"})
	}
	var budget *judge.BudgetError
	if errors.As(err, &budget) {
		return Result{Calls: jd.Calls, Cost: jd.Cost}, fmt.Errorf("%w: %s", ErrBudget, budget.Describe())
	}
	return Result{Score: jd.Score, Safety: jd.Safety, Invalid: jd.Invalid, Calls: jd.Calls, Cost: jd.Cost}, err
}

// Service keeps the scorers and runs them.
type Service struct {
	Pool *pgxpool.Pool
	// Jobs queues the scoring jobs the sampling finds work for.
	Jobs   jobq.Inserter
	Scorer Scorer
	// Judge checks a scorer's template when it is set; nil checks none.
	Judge *judge.Service
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// New builds live scoring: jobs queues the scoring the sampling finds work
// for, scorer scores each sampled answer, and judge checks a scorer's
// template when it is set (nil checks none).
func New(pool *pgxpool.Pool, jobs jobq.Inserter, scorer Scorer, judge *judge.Service) *Service {
	return &Service{Pool: pool, Jobs: jobs, Scorer: scorer, Judge: judge}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Limits.
const (
	// SampleBatch is how much feedback one sampling reads per scorer.
	SampleBatch = 5000
	// ScoreBatch is how many answers one scoring job scores.
	ScoreBatch = 200
	// Lag keeps the sampling this far behind now, so that feedback a
	// transaction still holds is not passed by the cursor before it is
	// committed.
	Lag = time.Minute
	// SampleEvery is how often the scorers sample.
	SampleEvery = time.Minute
)

// Config is what a scorer is told: what scores ("judge", the judge
// template's grade, when empty; or one of the RAG metrics, scorers.RAG),
// the judge endpoint's name, its template ("default" when empty; the
// judge's grade only), the endpoint that embeds text (answer_relevancy
// only), the share of answers to score (0 to 1) and whether it samples at
// all.
type Config struct {
	Scorer     string  `json:"scorer"`
	Endpoint   string  `json:"endpoint"`
	Embeddings string  `json:"embeddings_endpoint,omitempty"`
	Template   string  `json:"template"`
	Rate       float64 `json:"rate"`
	Enabled    *bool   `json:"enabled"`
}

// ScorerJudge is the judge template's grade, the scorer by default.
const ScorerJudge = "judge"

// Live is a scorer as the API shows it: what it scores (an experiment's
// key, or a model's name and alias), how, and what it did.
type Live struct {
	ID         uuid.UUID `json:"id"`
	Experiment string    `json:"experiment,omitempty"`
	Model      string    `json:"model,omitempty"`
	Alias      string    `json:"alias,omitempty"`
	Scorer     string    `json:"scorer"`
	Endpoint   string    `json:"endpoint"`
	Embeddings string    `json:"embeddings_endpoint,omitempty"`
	Template   string    `json:"template"`
	Rate       float64   `json:"rate"`
	Enabled    bool      `json:"enabled"`
	Scored     int64     `json:"scored"`
	Pending    int64     `json:"pending"`
	Skipped    int64     `json:"skipped"`
	Flagged    int64     `json:"flagged"`
	CostUSD    float64   `json:"cost_usd"`
}

// validate checks a configuration, filling the template.
func (s *Service) validate(ctx context.Context, orgID uuid.UUID, c *Config) error {
	v := &errs.Invalid{}
	if c.Scorer == "" {
		c.Scorer = ScorerJudge
	}
	if c.Scorer != ScorerJudge && !slices.Contains(scorers.RAG, c.Scorer) {
		v.Add("scorer", "must be judge (the judge template's grade) or a RAG metric: %s", strings.Join(scorers.RAG, ", "))
	}
	v.Text("endpoint", c.Endpoint, 100, true)
	if c.Template == "" {
		c.Template = judge.DefaultName
	}
	v.Text("template", c.Template, 100, true)
	switch {
	case c.Scorer == scorers.RAGAnswerRelevancy:
		v.Text("embeddings_endpoint", c.Embeddings, 100, true)
	case c.Embeddings != "":
		v.Add("embeddings_endpoint", "goes with the answer_relevancy scorer only")
	}
	if !(c.Rate > 0 && c.Rate <= 1) || math.IsNaN(c.Rate) {
		v.Add("rate", "must be above 0 and at most 1: the share of answers scored")
	}
	if err := v.Err(); err != nil {
		return err
	}
	if s.Judge != nil {
		if _, err := s.Judge.Template(ctx, orgID, c.Template); errors.Is(err, errs.ErrNotFound) {
			return errs.InvalidField("template", "no judge template has the name %q", c.Template)
		} else if err != nil {
			return err
		}
		if _, _, err := s.Judge.Endpoints.Client(ctx, orgID, c.Endpoint); err != nil {
			return errs.InvalidField("endpoint", "%s", judge.Describe(err))
		}
		if c.Embeddings != "" {
			if _, _, err := s.Judge.Endpoints.Client(ctx, orgID, c.Embeddings); err != nil {
				return errs.InvalidField("embeddings_endpoint", "%s", judge.Describe(err))
			}
		}
	}
	return nil
}

// SetForExperiment makes (or changes) the scorer of an experiment's
// answers, audited. A new scorer samples the feedback that arrives from
// then on.
func (s *Service) SetForExperiment(ctx context.Context, actor audit.Actor, orgID uuid.UUID, key string, c Config) (Live, error) {
	if err := s.validate(ctx, orgID, &c); err != nil {
		return Live{}, err
	}
	var out db.LiveScorer
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		e, err := q.ExperimentGetByKey(ctx, db.ExperimentGetByKeyParams{OrgID: orgID, Key: key})
		if err != nil {
			return errs.NotFound(err)
		}
		out, err = q.LiveScorerInsertForExperiment(ctx, db.LiveScorerInsertForExperimentParams{OrgID: orgID, ExperimentID: uuid.NullUUID{UUID: e.ID, Valid: true},
			Scorer: c.Scorer, Endpoint: c.Endpoint, EmbeddingsEndpoint: c.Embeddings, Template: c.Template, Rate: c.Rate,
			Enabled: c.Enabled == nil || *c.Enabled, CreatedByLabel: actor.Label})
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "live_scorer.set", TargetType: "experiment", TargetID: e.ID.String(),
			Details: map[string]any{"key": key, "scorer": c.Scorer, "endpoint": c.Endpoint, "template": c.Template, "rate": c.Rate, "enabled": out.Enabled}})
	})
	if err != nil {
		return Live{}, err
	}
	return s.get(ctx, orgID, out.ID)
}

// SetForAlias makes (or changes) the scorer of the answers of the version
// a registered model's alias serves (production, say), audited.
func (s *Service) SetForAlias(ctx context.Context, actor audit.Actor, orgID uuid.UUID, model, alias string, c Config) (Live, error) {
	if err := s.validate(ctx, orgID, &c); err != nil {
		return Live{}, err
	}
	var out db.LiveScorer
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		m, err := q.RegisteredModelGetByName(ctx, db.RegisteredModelGetByNameParams{OrgID: orgID, Name: model})
		if err != nil {
			return errs.NotFound(err)
		}
		if _, err := q.ModelAliasGet(ctx, db.ModelAliasGetParams{OrgID: orgID, RegisteredModelID: m.ID, Alias: alias}); err != nil {
			return errs.NotFound(err)
		}
		out, err = q.LiveScorerInsertForAlias(ctx, db.LiveScorerInsertForAliasParams{OrgID: orgID, RegisteredModelID: uuid.NullUUID{UUID: m.ID, Valid: true},
			Alias: alias, Scorer: c.Scorer, Endpoint: c.Endpoint, EmbeddingsEndpoint: c.Embeddings, Template: c.Template, Rate: c.Rate,
			Enabled: c.Enabled == nil || *c.Enabled, CreatedByLabel: actor.Label})
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "live_scorer.set", TargetType: "registered_model", TargetID: m.ID.String(),
			Details: map[string]any{"alias": alias, "scorer": c.Scorer, "endpoint": c.Endpoint, "template": c.Template, "rate": c.Rate, "enabled": out.Enabled}})
	})
	if err != nil {
		return Live{}, err
	}
	return s.get(ctx, orgID, out.ID)
}

// List reads the organisation's scorers with their counts.
func (s *Service) List(ctx context.Context, orgID uuid.UUID) ([]Live, error) {
	rows, err := db.New(s.Pool).LiveScorerList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Live, len(rows))
	for i, r := range rows {
		out[i] = Live{ID: r.ID, Experiment: r.ExperimentKey, Model: r.ModelName, Alias: r.Alias, Scorer: r.Scorer, Endpoint: r.Endpoint,
			Embeddings: r.EmbeddingsEndpoint, Template: r.Template, Rate: r.Rate, Enabled: r.Enabled, Scored: r.Scored, Pending: r.Pending,
			Skipped: r.Skipped, Flagged: r.Flagged, CostUSD: pricing.Micros(r.CostMicros).Dollars()}
	}
	return out, nil
}

// ForExperiment is the experiment's scorer, if it has one.
func (s *Service) ForExperiment(ctx context.Context, orgID uuid.UUID, key string) (Live, bool, error) {
	list, err := s.List(ctx, orgID)
	if err != nil {
		return Live{}, false, err
	}
	for _, l := range list {
		if l.Experiment == key {
			return l, true, nil
		}
	}
	return Live{}, false, nil
}

func (s *Service) get(ctx context.Context, orgID, id uuid.UUID) (Live, error) {
	list, err := s.List(ctx, orgID)
	if err != nil {
		return Live{}, err
	}
	for _, l := range list {
		if l.ID == id {
			return l, nil
		}
	}
	return Live{}, errs.ErrNotFound
}

// Sampled says whether a scorer samples a feedback item at its rate.
func Sampled(scorer, feedback uuid.UUID, rate float64) bool {
	return sampling.Sampled(scorer, feedback, rate)
}

// SampleArgs asks for every scorer to sample the feedback that arrived.
type SampleArgs struct{}

// Kind names the job in River's table.
func (SampleArgs) Kind() string { return "live_score_sample" }

// ScoreArgs asks for a scorer's sampled answers to be scored.
type ScoreArgs struct {
	ScorerID uuid.UUID `json:"scorer_id"`
}

// Kind names the job in River's table.
func (ScoreArgs) Kind() string { return "live_score" }

// InsertOpts keeps one scoring job per scorer at a time, so that no
// answer is sent to the judge twice at once.
func (ScoreArgs) InsertOpts() river.InsertOpts {
	return jobq.OnePerArgs()
}

// ScoreTimeout bounds one scoring job; what is left is taken by the next.
const ScoreTimeout = 10 * time.Minute

// SampleAll samples the new feedback of every enabled scorer, each on its
// own, and queues a scoring job for each that sampled anything.
func (s *Service) SampleAll(ctx context.Context) error {
	scorers, err := db.New(s.Pool).LiveScorerListEnabled(ctx)
	if err != nil {
		return err
	}
	var failed []error
	for _, sc := range scorers {
		if err := s.sample(ctx, sc); err != nil {
			failed = append(failed, fmt.Errorf("scorer %s: %w", sc.ID, err))
		}
	}
	// A scoring job that ended while more was sampled left it: queue
	// another.
	left, err := db.New(s.Pool).LiveScorerListWithPending(ctx)
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

// queue inserts a scoring job for the scorer.
func (s *Service) queue(ctx context.Context, id uuid.UUID) error {
	if s.Jobs == nil {
		return nil
	}
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, _ *db.Queries) error {
		_, err := s.Jobs.InsertTx(ctx, tx, ScoreArgs{ScorerID: id}, nil)
		return err
	})
}

// sample reads a scorer's feedback after its cursor (up to Lag before
// now), records the items its rate samples as pending, moves the cursor
// and queues its scoring job, in one transaction.
func (s *Service) sample(ctx context.Context, sc db.LiveScorer) error {
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		at, id := time.Time{}, uuid.Nil
		if sc.CursorAt != nil {
			at = *sc.CursorAt
		}
		if sc.CursorID.Valid {
			id = sc.CursorID.UUID
		}
		until := s.now().Add(-Lag)
		type item struct {
			id uuid.UUID
			at time.Time
		}
		var items []item
		if sc.ExperimentID.Valid {
			rows, err := q.LiveFeedbackListExperiment(ctx, db.LiveFeedbackListExperimentParams{OrgID: sc.OrgID, ExperimentID: sc.ExperimentID,
				Until: until, CursorAt: at, CursorID: id, RowLimit: SampleBatch})
			if err != nil {
				return err
			}
			for _, r := range rows {
				items = append(items, item{r.ID, r.CreatedAt})
			}
		} else {
			names, err := s.aliasNames(ctx, q, sc)
			if err != nil || len(names) == 0 {
				return err
			}
			rows, err := q.LiveFeedbackListModels(ctx, db.LiveFeedbackListModelsParams{OrgID: sc.OrgID, Models: names, Until: until,
				CursorAt: at, CursorID: id, RowLimit: SampleBatch})
			if err != nil {
				return err
			}
			for _, r := range rows {
				items = append(items, item{r.ID, r.CreatedAt})
			}
		}
		if len(items) == 0 {
			return nil
		}
		var picked []uuid.UUID
		for _, it := range items {
			if Sampled(sc.ID, it.id, sc.Rate) {
				picked = append(picked, it.id)
			}
		}
		last := items[len(items)-1]
		if err := q.LiveScorerUpdateCursor(ctx, db.LiveScorerUpdateCursorParams{ID: sc.ID, CursorAt: &last.at,
			CursorID: uuid.NullUUID{UUID: last.id, Valid: true}}); err != nil {
			return err
		}
		if len(picked) == 0 {
			return nil
		}
		if _, err := q.LiveScoreInsertPending(ctx, db.LiveScoreInsertPendingParams{ScorerID: sc.ID, FeedbackIds: picked, OrgID: sc.OrgID}); err != nil {
			return err
		}
		if s.Jobs == nil {
			return nil
		}
		_, err := s.Jobs.InsertTx(ctx, tx, ScoreArgs{ScorerID: sc.ID}, nil)
		return err
	})
}

// aliasNames are the names feedback gives the version the scorer's alias
// serves now; none when the alias is gone.
func (s *Service) aliasNames(ctx context.Context, q *db.Queries, sc db.LiveScorer) ([]string, error) {
	a, err := q.ModelAliasGet(ctx, db.ModelAliasGetParams{OrgID: sc.OrgID, RegisteredModelID: sc.RegisteredModelID.UUID, Alias: sc.Alias})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return q.ModelVersionListServedNames(ctx, db.ModelVersionListServedNamesParams{OrgID: sc.OrgID, VersionID: a.VersionID})
}

// Score scores a scorer's pending answers in batches of ScoreBatch, one
// answer at a time, each claimed first (so that two runs never send one
// answer to the judge twice) and recorded before the next is asked for,
// so a retry resumes where it stopped. A spent budget skips what is left, with
// the reason; a judge that cannot be reached fails the job for River to
// retry.
//
// A claim older than ten minutes is a dead scorer's, and so is one made
// before takenOverBefore: the job's retried attempt passes the moment it
// started, since one scoring job per scorer runs at a time (ScoreArgs)
// and the heartbeat sweep retries it only once the killed attempt's
// worker stopped beating, so the answer that attempt had under way is
// scored at once rather than ten minutes on. The zero time takes over
// old claims only, for runs that may overlap.
func (s *Service) Score(ctx context.Context, scorerID uuid.UUID, takenOverBefore time.Time) error {
	q := db.New(s.Pool)
	sc, err := q.LiveScorerGet(ctx, scorerID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // deleted with its experiment
	}
	if err != nil {
		return err
	}
	c := Config{Scorer: sc.Scorer, Endpoint: sc.Endpoint, Embeddings: sc.EmbeddingsEndpoint, Template: sc.Template, Rate: sc.Rate}
	for {
		rows, err := q.LiveScoreListPending(ctx, db.LiveScoreListPendingParams{ScorerID: scorerID, RowLimit: ScoreBatch,
			TakenOverBefore: takenOverBefore})
		if err != nil || len(rows) == 0 {
			return err
		}
		for _, r := range rows {
			if err := ctx.Err(); err != nil {
				return err
			}
			claimed, err := q.LiveScoreUpdateClaim(ctx, db.LiveScoreUpdateClaimParams{ScorerID: scorerID, FeedbackID: r.FeedbackID,
				TakenOverBefore: takenOverBefore})
			if err != nil {
				return err
			}
			if claimed == 0 {
				continue // another scoring run took it
			}
			res, err := s.Scorer.Score(ctx, sc.OrgID, c, scorers.Input{Query: r.Query, Answer: r.Response, Reference: r.Correction,
				Context: documents(r.Context)})
			if errors.Is(err, ErrBudget) {
				_, err := q.LiveScoreUpdateSkipped(ctx, db.LiveScoreUpdateSkippedParams{ScorerID: scorerID,
					Reason: strings.TrimPrefix(err.Error(), ErrBudget.Error()+": ")})
				return err
			}
			if err != nil {
				// Not reached: the answer is left for the retry.
				return errors.Join(err, q.LiveScoreUpdateRelease(context.WithoutCancel(ctx), db.LiveScoreUpdateReleaseParams{ScorerID: scorerID,
					FeedbackID: r.FeedbackID}))
			}
			u := db.LiveScoreUpdateParams{ScorerID: scorerID, FeedbackID: r.FeedbackID, Status: "scored", SafetyFlag: res.Safety,
				Calls: int32(res.Calls), CostMicros: int64(res.Cost)}
			if res.Invalid != "" {
				u.Status, u.Reason, u.SafetyFlag = "invalid", res.Invalid, false
			} else {
				u.Score = pgtype.Float8{Float64: res.Score, Valid: true}
			}
			if err := q.LiveScoreUpdate(ctx, u); err != nil {
				return err
			}
		}
	}
}

// documents are the documents of a feedback's context object (its
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
