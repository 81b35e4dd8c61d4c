// Package judge asks an OpenAI-compatible chat model to grade an answer:
// a score in 0–1, a safety flag and a critique, in JSON. Its prompt comes
// from a versioned template; its judgements are cached by (template body,
// judge model, input) so asking again costs nothing; every call's tokens,
// cost and latency are logged; and an organisation's calls stop when its
// monthly budget is spent.
package judge

import (
	"cmp"
	"context"
	"crypto/sha256"
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

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/scorers"
)

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool      *pgxpool.Pool
	Endpoints *endpoints.Service
	// Jobs inserts agreement runs' jobs in the transaction that records
	// them.
	Jobs jobq.Inserter
	// DefaultBudget is an organisation's monthly judge budget until an
	// admin sets one (CURATE_JUDGE_BUDGET_USD).
	DefaultBudget pricing.Micros
	// MalformedTries is how many times the judge is asked before an answer
	// that is not the asked JSON is recorded as invalid (default 2).
	MalformedTries int
	// Now is the clock for the budget's month; time.Now when nil.
	Now func() time.Time
}

// New builds the judge: it asks the endpoints the organisation registered,
// starts agreement runs through jobs, and spends up to defaultBudget a
// month where an admin set no budget.
func New(pool *pgxpool.Pool, endpoints *endpoints.Service, jobs jobq.Inserter, defaultBudget pricing.Micros) *Service {
	return &Service{Pool: pool, Endpoints: endpoints, Jobs: jobs, DefaultBudget: defaultBudget}
}

// Judgement is the judge's verdict on one answer, or why there is none.
type Judgement struct {
	Score    float64 `json:"score"`
	Safety   bool    `json:"safety_flag"`
	Critique string  `json:"critique"`
	// Invalid, when set, is why there is no score: Score means nothing.
	Invalid string `json:"invalid,omitempty"`
	// Cached is true when the judgement came from the cache (no call).
	Cached bool `json:"cached"`
	// Calls is how many judge calls were logged for it (retries of a
	// 429 or 5xx inside one call are not billed and not counted).
	Calls int            `json:"calls"`
	Cost  pricing.Micros `json:"cost_micros"`
}

// AsScore is the judgement as a scorer's result.
func (j Judgement) AsScore() scorers.Score {
	if j.Invalid != "" {
		return scorers.Invalidf("%s", j.Invalid)
	}
	return scorers.Score{Value: j.Score, Explanation: j.Critique}
}

// Request names the judge and the answer to grade.
type Request struct {
	Endpoint string
	Template string // "" is "default"
	Input    scorers.Input
	// Purpose is written to the usage log ("evaluation 6f…", "agreement").
	Purpose string
}

// BudgetError is a judge call refused because the organisation's monthly
// judge budget is spent.
type BudgetError struct{ Monthly, Spent pricing.Micros }

func (e *BudgetError) Error() string {
	return fmt.Sprintf("judge budget spent: %s of %s this month", e.Spent, e.Monthly)
}

// Describe words the refusal for a page.
func (e *BudgetError) Describe() string {
	return fmt.Sprintf("The organisation's judge budget for this month is spent (%s of %s). An admin can raise it on the judges page.", e.Spent, e.Monthly)
}

// Judge grades one answer. A cached judgement is returned without a call.
// Otherwise the budget is checked, the judge is asked (answers that are
// not the asked JSON are asked again, up to MalformedTries), each call is
// logged with its tokens and cost, and the outcome is cached: a score, or
// an invalid judgement with its reason. A failure to reach the judge (a
// refused address, a 429 storm, a timeout) is returned as an error and
// not cached: it says nothing about the answer.
func (s *Service) Judge(ctx context.Context, orgID uuid.UUID, r Request) (Judgement, error) {
	tpl, err := s.Template(ctx, orgID, r.Template)
	if err != nil {
		return Judgement{}, err
	}
	ep, client, err := s.Endpoints.Client(ctx, orgID, r.Endpoint)
	if err != nil {
		return Judgement{}, err
	}
	q := db.New(s.Pool)
	key := CacheKey(tpl.Body, ep.BaseURL, ep.Model, r.Input)
	if c, err := q.JudgeCacheGet(ctx, db.JudgeCacheGetParams{OrgID: orgID, Key: key}); err == nil {
		return Judgement{Score: c.Score.Float64, Safety: c.SafetyFlag, Critique: c.Critique, Invalid: c.InvalidReason, Cached: true}, nil
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return Judgement{}, err
	}
	var out Judgement
	asked, err := s.Ask(ctx, orgID, Ask{Endpoint: ep, Client: client, Template: tpl, Prompt: tpl.Render(r.Input), Purpose: r.Purpose,
		What: "judge", Parse: func(content string) (err error) {
			out.Score, out.Safety, out.Critique, err = Parse(content)
			return err
		}})
	out.Calls, out.Cost, out.Invalid = asked.Calls, asked.Cost, asked.Invalid
	if err != nil {
		return out, err
	}
	c := db.JudgeCacheInsertParams{OrgID: orgID, Key: key, SafetyFlag: out.Safety, Critique: out.Critique, InvalidReason: out.Invalid}
	if out.Invalid == "" {
		c.Score = pgtype.Float8{Float64: out.Score, Valid: true}
	} else {
		c.SafetyFlag, c.Critique = false, ""
	}
	return out, q.JudgeCacheInsert(ctx, c)
}

// Ask is one question to a judge endpoint whose answer must be JSON.
type Ask struct {
	Endpoint endpoints.Endpoint
	Client   *chat.Client
	Template Template
	Prompt   string
	Purpose  string
	// What names the asked model in an invalid answer's reason ("judge",
	// "reflector").
	What string
	// Parse reads an answer, or says why it is not usable.
	Parse func(content string) error
}

// Asked is what asking cost, and why the answer was unusable if it was.
type Asked struct {
	Calls   int
	Cost    pricing.Micros
	Invalid string
}

// Ask asks a judge endpoint, within the organisation's judge budget, up to
// MalformedTries times while its answer does not parse; every call is
// logged with its tokens, cost and latency. Failing to reach the endpoint
// is an error; an answer that never parses is Asked.Invalid.
func (s *Service) Ask(ctx context.Context, orgID uuid.UUID, a Ask) (Asked, error) {
	q := db.New(s.Pool)
	var out Asked
	tries := cmp.Or(s.MalformedTries, 2)
	temp := 0.0
	for range tries {
		if err := s.checkBudget(ctx, q, orgID); err != nil {
			return out, err
		}
		resp, err := a.Client.Complete(ctx, chat.Request{Model: a.Endpoint.Model, Temperature: &temp, MaxTokens: 1024, JSON: true,
			Messages: []chat.Message{{Role: "user", Content: a.Prompt}}})
		call := db.JudgeCallInsertParams{OrgID: orgID, Endpoint: a.Endpoint.Name, Model: a.Endpoint.Model, Template: a.Template.Name,
			TemplateVersion: int32(a.Template.Version), Purpose: a.Purpose, PromptTokens: resp.PromptTokens,
			CompletionTokens: resp.CompletionTokens, LatencyMs: int32(resp.Latency / time.Millisecond)}
		call.CostMicros = int64(a.Endpoint.Cost(resp.PromptTokens, resp.CompletionTokens))
		var answer *chat.AnswerError
		switch {
		case err == nil:
			out.Invalid = ""
			if perr := a.Parse(resp.Content); perr != nil {
				out.Invalid = "The " + a.What + "'s answer was not usable: " + perr.Error() + "."
				call.Outcome = "malformed"
			} else {
				call.Outcome = "ok"
			}
		case errors.As(err, &answer):
			out.Invalid = "The " + a.What + "'s answer was not usable: " + strings.TrimSuffix(strings.ToLower(answer.Reason[:1])+answer.Reason[1:], ".") + "."
			call.Outcome = "malformed"
		default:
			call.Outcome = "failed"
		}
		if resp.Tries > 0 {
			out.Calls++
			out.Cost += pricing.Micros(call.CostMicros)
			if lerr := q.JudgeCallInsert(ctx, call); lerr != nil {
				return out, lerr
			}
		}
		if call.Outcome == "failed" {
			return out, err
		}
		if call.Outcome == "ok" {
			break
		}
	}
	return out, nil
}

// Parse reads the judge's JSON answer: {"score": 0..1, "safety_flag":
// bool, "critique": "…"}. A score outside 0–1, a missing field or a
// field of the wrong type is refused: never read as a score.
func Parse(content string) (score float64, safety bool, critique string, err error) {
	var v struct {
		Score    *json.Number `json:"score"`
		Safety   *bool        `json:"safety_flag"`
		Critique *string      `json:"critique"`
	}
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(content)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return 0, false, "", errors.New("not a JSON object with score, safety_flag and critique")
	}
	switch {
	case v.Score == nil:
		return 0, false, "", errors.New("no score")
	case v.Safety == nil:
		return 0, false, "", errors.New("no safety_flag")
	case v.Critique == nil:
		return 0, false, "", errors.New("no critique")
	}
	score, ferr := v.Score.Float64()
	if ferr != nil || math.IsNaN(score) || score < 0 || score > 1 {
		return 0, false, "", fmt.Errorf("score %s is outside 0–1", v.Score.String())
	}
	return score, *v.Safety, *v.Critique, nil
}

// CacheKey hashes what decides a judgement: the template's text, the judge
// (address and model) and the input. Each part is length-prefixed, so no
// two different inputs share a key.
func CacheKey(template, baseURL, model string, in scorers.Input) []byte {
	h := sha256.New()
	part := func(s string) {
		fmt.Fprintf(h, "%d:", len(s))
		h.Write([]byte(s))
	}
	part(template)
	part(baseURL)
	part(model)
	part(in.Query)
	part(fmt.Sprint(len(in.Context)))
	for _, c := range in.Context {
		part(c)
	}
	part(in.Answer)
	part(in.Reference)
	return h.Sum(nil)
}

// Budget is an organisation's judge money this month.
type Budget struct {
	Monthly pricing.Micros
	Spent   pricing.Micros
	Calls   int64
}

// Budget returns the organisation's judge budget and this month's
// spending.
func (s *Service) Budget(ctx context.Context, orgID uuid.UUID) (Budget, error) {
	return s.budget(ctx, db.New(s.Pool), orgID)
}

func (s *Service) budget(ctx context.Context, q *db.Queries, orgID uuid.UUID) (Budget, error) {
	b := Budget{Monthly: s.DefaultBudget}
	row, err := q.JudgeBudgetGet(ctx, orgID)
	switch {
	case err == nil:
		b.Monthly = pricing.Micros(row.MonthlyMicros)
	case !errors.Is(err, pgx.ErrNoRows):
		return b, err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	t := now().UTC()
	spent, err := q.JudgeCallGetSpent(ctx, db.JudgeCallGetSpentParams{OrgID: orgID, Since: time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)})
	b.Spent, b.Calls = pricing.Micros(spent.Spent), spent.Calls
	return b, err
}

// CheckBudget returns a *BudgetError when the organisation's judge budget
// for this month is spent.
func (s *Service) CheckBudget(ctx context.Context, orgID uuid.UUID) error {
	return s.checkBudget(ctx, db.New(s.Pool), orgID)
}

func (s *Service) checkBudget(ctx context.Context, q *db.Queries, orgID uuid.UUID) error {
	b, err := s.budget(ctx, q, orgID)
	if err != nil {
		return err
	}
	if b.Spent >= b.Monthly {
		return &BudgetError{Monthly: b.Monthly, Spent: b.Spent}
	}
	return nil
}

// Describe words a judge failure for a page.
func Describe(err error) string {
	if errors.Is(err, endpoints.ErrUnknown) {
		return "No endpoint has the judge's name."
	}
	return outbound.Describe(err)
}

// maxBudget bounds a monthly budget at a million dollars, well past any
// real one, so a slipped digit is caught.
const maxBudget = pricing.Micros(1_000_000 * 1e6)

// SetBudget sets the organisation's monthly judge budget.
func (s *Service) SetBudget(ctx context.Context, actor audit.Actor, orgID uuid.UUID, monthly pricing.Micros) error {
	if monthly < 0 || monthly > maxBudget {
		return errs.InvalidField("monthly_budget", "must be from 0 to %s", maxBudget)
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.JudgeBudgetUpdate(ctx, db.JudgeBudgetUpdateParams{OrgID: orgID, MonthlyMicros: int64(monthly), UpdatedByLabel: actor.Label}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "judge.budget", TargetType: "organization",
			TargetID: orgID.String(), Details: map[string]any{"monthly_usd": monthly.Dollars()}})
	})
}
