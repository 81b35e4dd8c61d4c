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
//
// Each call reserves its estimated cost against the month's budget before
// it is sent and settles to what it cost once answered, in the
// transaction that logs it (a failed call releases its reservation): of
// parallel calls only those that find room left in the budget are sent,
// so together they overshoot it by one call's estimate at most.
func (s *Service) Ask(ctx context.Context, orgID uuid.UUID, a Ask) (Asked, error) {
	q := db.New(s.Pool)
	var out Asked
	tries := cmp.Or(s.MalformedTries, 2)
	temp := 0.0
	estimate := a.Endpoint.Cost(int64(len(a.Prompt))+promptOverhead, askMaxTokens)
	for range tries {
		res, err := s.reserve(ctx, q, orgID, estimate, a.Purpose)
		if err != nil {
			return out, err
		}
		resp, err := a.Client.Complete(ctx, chat.Request{Model: a.Endpoint.Model, Temperature: &temp, MaxTokens: askMaxTokens, JSON: true,
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
		var logged *db.JudgeCallInsertParams
		if resp.Tries > 0 {
			out.Calls++
			out.Cost += pricing.Micros(call.CostMicros)
			logged = &call
		}
		// Settled even when the caller gave up meanwhile: the call may have
		// been paid for, and its reservation must not wait to expire.
		if serr := s.settle(context.WithoutCancel(ctx), res, logged); serr != nil {
			return out, serr
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

// A call's estimate is an upper bound on what it may cost: its answer is
// capped at askMaxTokens, and its prompt has no more tokens than bytes
// (every token of a byte-level tokenizer covers one byte at least) plus
// the chat template's few. Settling returns what it did not use.
const (
	askMaxTokens   = 1024
	promptOverhead = 16
)

// reservationTTL is how long a reservation holds its money when it is not
// settled: far longer than a call with all its retries may take, so only a
// process that stopped between reserving and settling lets one expire.
const reservationTTL = 10 * time.Minute

// reservation is money held for one call under way.
type reservation struct {
	id    int64
	orgID uuid.UUID
	month time.Time
}

// reserve holds estimate against the organisation's budget for this
// month, in one statement. When the month's spending has reached the
// budget the call is refused with a *BudgetError. When room is left but
// calls under way hold it, reservations past their expiry are given back
// and the call waits for the others to settle.
func (s *Service) reserve(ctx context.Context, q *db.Queries, orgID uuid.UUID, estimate pricing.Micros, purpose string) (reservation, error) {
	monthly, err := s.monthly(ctx, q, orgID)
	if err != nil {
		return reservation{}, err
	}
	month := monthStart(s.now())
	wait := 20 * time.Millisecond
	for made := false; ; {
		id, err := q.JudgeReservationInsert(ctx, db.JudgeReservationInsertParams{OrgID: orgID, Month: month, MonthlyMicros: int64(monthly),
			Micros: int64(estimate), Purpose: purpose, TtlSeconds: reservationTTL.Seconds()})
		if err == nil {
			return reservation{id: id, orgID: orgID, month: month}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return reservation{}, err
		}
		row, err := q.JudgeSpendingGet(ctx, db.JudgeSpendingGetParams{OrgID: orgID, Month: month})
		if errors.Is(err, pgx.ErrNoRows) && !made {
			// The month's first call: its row starts at what the month's
			// logged calls cost.
			made = true
			if err := q.JudgeSpendingInsertMonth(ctx, db.JudgeSpendingInsertMonthParams{OrgID: orgID, Month: month, MonthEnd: month.AddDate(0, 1, 0)}); err != nil {
				return reservation{}, err
			}
			continue
		}
		if err != nil {
			return reservation{}, err
		}
		if row.SpentMicros >= int64(monthly) {
			return reservation{}, &BudgetError{Monthly: monthly, Spent: pricing.Micros(row.SpentMicros)}
		}
		if n, err := q.JudgeReservationDeleteExpired(ctx, orgID); err != nil {
			return reservation{}, err
		} else if n > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return reservation{}, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// settle gives a reservation back, counting what its call cost, and logs
// the call (nil: no request was sent) in the same transaction.
func (s *Service) settle(ctx context.Context, r reservation, call *db.JudgeCallInsertParams) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		p := db.JudgeReservationDeleteSettledParams{ID: r.id, OrgID: r.orgID, Month: r.month}
		if call != nil {
			if err := q.JudgeCallInsert(ctx, *call); err != nil {
				return err
			}
			p.CostMicros = call.CostMicros
		}
		return q.JudgeReservationDeleteSettled(ctx, p)
	})
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
	monthly, err := s.monthly(ctx, q, orgID)
	if err != nil {
		return Budget{}, err
	}
	b := Budget{Monthly: monthly}
	spent, err := q.JudgeCallGetSpent(ctx, db.JudgeCallGetSpentParams{OrgID: orgID, Since: monthStart(s.now())})
	b.Spent, b.Calls = pricing.Micros(spent.Spent), spent.Calls
	return b, err
}

// monthly is the organisation's monthly judge budget: an admin's, or the
// server's default.
func (s *Service) monthly(ctx context.Context, q *db.Queries, orgID uuid.UUID) (pricing.Micros, error) {
	row, err := q.JudgeBudgetGet(ctx, orgID)
	switch {
	case err == nil:
		return pricing.Micros(row.MonthlyMicros), nil
	case errors.Is(err, pgx.ErrNoRows):
		return s.DefaultBudget, nil
	}
	return 0, err
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// monthStart is the first instant of t's month, UTC: budgets are monthly.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
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
