package codebook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/scorers"
)

// MaxSuggest bounds the corrected items one request asks suggestions for.
const MaxSuggest = 200

// SuggestArgs is the River job that asks the reflector for the pending
// suggestions it names.
type SuggestArgs struct {
	OrgID uuid.UUID   `json:"org_id"`
	IDs   []uuid.UUID `json:"ids"`
}

// Kind names the job.
func (SuggestArgs) Kind() string { return "codebook_suggest" }

// SuggestRequest asks the reflector at a judge endpoint for a rule from
// each corrected item: the items named, or those a queue filter matches.
type SuggestRequest struct {
	Endpoint    string
	FeedbackIDs []uuid.UUID
	Filter      *feedback.Filter
}

// Suggest records a pending suggestion for each corrected item asked (an
// item already pending, ready or accepted is left as it is) and queues the
// job that asks the reflector, audited, in one transaction. It answers how
// many were queued.
func (s *Service) Suggest(ctx context.Context, actor audit.Actor, orgID uuid.UUID, name string, r SuggestRequest) (int, error) {
	if err := CheckName(name); err != nil {
		return 0, err
	}
	if s.Judge == nil {
		return 0, errs.InvalidField("endpoint", "suggestions need a judge endpoint, and none is configured")
	}
	v := &errs.Invalid{}
	if _, _, err := s.Judge.Endpoints.Client(ctx, orgID, r.Endpoint); errors.Is(err, endpoints.ErrUnknown) {
		v.Add("endpoint", "no judge endpoint is named %q", r.Endpoint)
	} else if err != nil {
		return 0, err
	}
	tpl, err := s.Judge.Template(ctx, orgID, judge.ReflectorName)
	if err != nil {
		return 0, err
	}
	ids := r.FeedbackIDs
	if r.Filter != nil {
		// The newest corrected items among the filter's first matches.
		if ids, err = db.New(s.Pool).FeedbackListMatchingIDs(ctx, r.Filter.MatchingParams(orgID, 25*MaxSuggest)); err != nil {
			return 0, err
		}
		if len(ids) == 0 {
			v.Add("feedback_ids", "the filter matches no item")
		}
	} else if len(ids) == 0 {
		v.Add("feedback_ids", "name at least one corrected item")
	} else if len(ids) > MaxSuggest {
		v.Add("feedback_ids", "at most %d items at once", MaxSuggest)
	}
	if err := v.Err(); err != nil {
		return 0, err
	}
	n := 0
	err = db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		b, err := q.CodebookInsertOrGet(ctx, db.CodebookInsertOrGetParams{OrgID: orgID, Name: name})
		if err != nil {
			return err
		}
		queued, err := q.CodebookSuggestionInsertMany(ctx, db.CodebookSuggestionInsertManyParams{OrgID: orgID, CodebookID: b.ID,
			FeedbackIds: ids, RowLimit: MaxSuggest, Endpoint: r.Endpoint, TemplateVersion: int32(tpl.Version), CreatedByLabel: actor.Label})
		if err != nil {
			return err
		}
		if n = len(queued); n == 0 {
			return errs.InvalidField("feedback_ids", "no corrected item without a suggestion is among those asked")
		}
		if _, err := s.Jobs.InsertTx(ctx, tx, SuggestArgs{OrgID: orgID, IDs: queued}, nil); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "codebook.suggest", TargetType: "codebook",
			TargetID: b.ID.String(), Details: map[string]any{"name": name, "endpoint": r.Endpoint, "items": n}})
	})
	return n, err
}

// AnswerSuggestions asks the reflector for each pending suggestion of the
// job, one at a time, each answer stored as it comes: a retried job asks
// only for what is still pending, and an answer given before (same
// template, endpoint and item) is reused without a call.
func (s *Service) AnswerSuggestions(ctx context.Context, a SuggestArgs) error {
	// The template and each endpoint's client are read once per job, not
	// once per item.
	tpl, err := s.Judge.Template(ctx, a.OrgID, judge.ReflectorName)
	if err != nil {
		return err
	}
	clients := map[string]reflectorClient{}
	client := func(name string) reflectorClient {
		c, ok := clients[name]
		if !ok {
			c.ep, c.client, c.err = s.Judge.Endpoints.Client(ctx, a.OrgID, name)
			clients[name] = c
		}
		return c
	}
	for _, id := range a.IDs {
		if err := s.answer(ctx, a.OrgID, id, tpl, client); err != nil {
			return err
		}
	}
	return nil
}

// reflectorClient is a judge endpoint as the reflector asks it, or why it
// cannot be.
type reflectorClient struct {
	ep     endpoints.Endpoint
	client *chat.Client
	err    error
}

func (s *Service) answer(ctx context.Context, orgID, id uuid.UUID, tpl judge.Template, client func(string) reflectorClient) error {
	q := db.New(s.Pool)
	sg, err := q.CodebookSuggestionGetByID(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if sg.Status != db.SuggestionStatusPending {
		return nil
	}
	item, err := q.FeedbackGet(ctx, db.FeedbackGetParams{OrgID: orgID, ID: sg.FeedbackID})
	if err != nil {
		return err
	}
	up := db.CodebookSuggestionUpdateAnswerParams{ID: id, Status: db.SuggestionStatusReady}
	c := client(sg.Endpoint)
	if c.err != nil {
		up.Status, up.Reason = db.SuggestionStatusFailed, "The judge endpoint "+sg.Endpoint+" could not be used: "+judge.Describe(c.err)
		return q.CodebookSuggestionUpdateAnswer(ctx, up)
	}
	ep := c.ep
	f := item.Feedback
	in := scorers.Input{Query: f.Query, Answer: f.Response, Reference: f.Correction}
	up.CacheKey = judge.CacheKey(tpl.Body, ep.BaseURL, ep.Model, in)
	if c, err := q.CodebookSuggestionGetCached(ctx, db.CodebookSuggestionGetCachedParams{OrgID: orgID, CacheKey: up.CacheKey}); err == nil {
		up.Section, up.Content = c.Section, c.Content
		return q.CodebookSuggestionUpdateAnswer(ctx, up)
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	var rule NewRule
	asked, err := s.Judge.Ask(ctx, orgID, judge.Ask{Endpoint: ep, Client: c.client, Template: tpl, Prompt: tpl.Render(in),
		Purpose: "reflector " + id.String()[:8], What: "reflector", Parse: func(content string) (err error) {
			rule, err = ParseReflection(content)
			return err
		}})
	up.Calls, up.CostMicros = int32(asked.Calls), int64(asked.Cost)
	var budget *judge.BudgetError
	switch {
	case errors.As(err, &budget):
		up.Status, up.Reason = db.SuggestionStatusFailed, budget.Describe()
	case err != nil && ctx.Err() == nil:
		up.Status, up.Reason = db.SuggestionStatusFailed, "The reflector could not be asked: "+judge.Describe(err)
	case err != nil:
		return err
	case asked.Invalid != "":
		up.Status, up.Reason = db.SuggestionStatusFailed, asked.Invalid
	default:
		up.Section, up.Content = rule.Section, rule.Content
	}
	return q.CodebookSuggestionUpdateAnswer(ctx, up)
}

// ParseReflection reads the reflector's answer, {"section": "…", "rule":
// "…"}, as a rule that passes the checks a curator's rule passes. Anything
// else is refused with the reason: a suggestion is never made from it.
func ParseReflection(content string) (NewRule, error) {
	var v struct {
		Section *string `json:"section"`
		Rule    *string `json:"rule"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(content)), &v); err != nil {
		return NewRule{}, errors.New("not a JSON object with section and rule")
	}
	if v.Rule == nil || strings.TrimSpace(*v.Rule) == "" {
		return NewRule{}, errors.New("no rule")
	}
	r := NewRule{Content: *v.Rule, Status: "draft"}
	if v.Section != nil {
		r.Section = *v.Section
	}
	inv := &errs.Invalid{}
	r.check(inv, "")
	if err := inv.Err(); err != nil {
		var parts []string
		for f, m := range inv.ByField() {
			parts = append(parts, f+" "+m)
		}
		return NewRule{}, fmt.Errorf("the rule's %s", strings.Join(parts, "; "))
	}
	return r, nil
}

// Suggestion is a drafted rule with the item it came from (the item's
// texts are for the pages; the API names the item by id).
type Suggestion struct {
	ID         uuid.UUID  `json:"id"`
	FeedbackID uuid.UUID  `json:"feedback_id"`
	Status     string     `json:"status"`
	Section    string     `json:"section"`
	Content    string     `json:"content"`
	Reason     string     `json:"reason,omitempty"`
	Endpoint   string     `json:"endpoint"`
	Calls      int        `json:"calls"`
	CostMicros int64      `json:"cost_micros"`
	RuleID     *uuid.UUID `json:"rule_id"`
	Query      string     `json:"-"`
	Response   string     `json:"-"`
	Correction string     `json:"-"`
}

// Suggestions lists a codebook's suggestions in a status ("" for all),
// oldest first: the review queue.
func (s *Service) Suggestions(ctx context.Context, orgID uuid.UUID, name, status string) ([]Suggestion, map[string]int, error) {
	q := db.New(s.Pool)
	b, err := book(ctx, q, orgID, name)
	if err != nil {
		return nil, nil, err
	}
	rows, err := q.CodebookSuggestionList(ctx, db.CodebookSuggestionListParams{CodebookID: b.ID, Status: status})
	if err != nil {
		return nil, nil, err
	}
	byStatus, err := suggestionCounts(ctx, q, b.ID)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Suggestion, len(rows))
	for i, r := range rows {
		out[i] = Suggestion{ID: r.ID, FeedbackID: r.FeedbackID, Status: string(r.Status), Section: r.Section, Content: r.Content,
			Reason: r.Reason, Endpoint: r.Endpoint, Calls: int(r.Calls), CostMicros: r.CostMicros, Query: r.Query, Response: r.Response, Correction: r.Correction}
		if r.RuleID.Valid {
			out[i].RuleID = &r.RuleID.UUID
		}
	}
	return out, byStatus, nil
}

// SuggestionCounts counts a codebook's suggestions by status.
func (s *Service) SuggestionCounts(ctx context.Context, orgID uuid.UUID, name string) (map[string]int, error) {
	q := db.New(s.Pool)
	b, err := book(ctx, q, orgID, name)
	if err != nil {
		return nil, err
	}
	return suggestionCounts(ctx, q, b.ID)
}

func suggestionCounts(ctx context.Context, q *db.Queries, bookID uuid.UUID) (map[string]int, error) {
	counts, err := q.CodebookSuggestionCount(ctx, bookID)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, c := range counts {
		out[string(c.Status)] = int(c.N)
	}
	return out, nil
}

// Endpoints names the judge endpoints the reflector may be asked at.
func (s *Service) Endpoints(ctx context.Context, orgID uuid.UUID) ([]string, error) {
	if s.Judge == nil {
		return nil, nil
	}
	eps, err := s.Judge.Endpoints.List(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.Name
	}
	return out, nil
}

// SuggestionFor is the suggestion for one item, if one was asked.
func (s *Service) SuggestionFor(ctx context.Context, orgID uuid.UUID, name string, feedbackID uuid.UUID) (*Suggestion, error) {
	q := db.New(s.Pool)
	b, err := book(ctx, q, orgID, name)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := q.CodebookSuggestionGetByFeedback(ctx, db.CodebookSuggestionGetByFeedbackParams{OrgID: orgID, CodebookID: b.ID, FeedbackID: feedbackID})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Suggestion{ID: r.ID, FeedbackID: r.FeedbackID, Status: string(r.Status), Section: r.Section, Content: r.Content, Reason: r.Reason,
		Endpoint: r.Endpoint}, nil
}

// Dismiss sets a suggestion aside; it can be asked for again later.
func (s *Service) Dismiss(ctx context.Context, actor audit.Actor, orgID uuid.UUID, name string, id uuid.UUID) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		b, err := book(ctx, q, orgID, name)
		if err != nil {
			return err
		}
		n, err := q.CodebookSuggestionUpdateReviewed(ctx, db.CodebookSuggestionUpdateReviewedParams{OrgID: orgID, CodebookID: b.ID, ID: id,
			Status: db.SuggestionStatusDismissed})
		if err != nil {
			return err
		}
		if n == 0 {
			return notReviewable(ctx, q, orgID, b.ID, id)
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "codebook.suggestion_dismiss", TargetType: "codebook_suggestion",
			TargetID: id.String(), Details: map[string]any{"codebook": name}})
	})
}

// markAccepted links an accepted suggestion to the rule it became, in the
// rule's transaction.
func markAccepted(ctx context.Context, q *db.Queries, orgID, bookID, suggestionID, ruleID uuid.UUID) error {
	n, err := q.CodebookSuggestionUpdateReviewed(ctx, db.CodebookSuggestionUpdateReviewedParams{OrgID: orgID, CodebookID: bookID, ID: suggestionID,
		Status: db.SuggestionStatusAccepted, RuleID: uuid.NullUUID{UUID: ruleID, Valid: true}})
	if err != nil {
		return err
	}
	if n == 0 {
		return notReviewable(ctx, q, orgID, bookID, suggestionID)
	}
	return nil
}

// notReviewable says why a suggestion could not be reviewed: it is not one
// of the codebook's (another organisation's id is simply not found), or it
// was reviewed already.
func notReviewable(ctx context.Context, q *db.Queries, orgID, bookID, id uuid.UUID) error {
	_, err := q.CodebookSuggestionGet(ctx, db.CodebookSuggestionGetParams{OrgID: orgID, CodebookID: bookID, ID: id})
	if err != nil {
		return errs.NotFound(err)
	}
	return &errs.Conflict{Message: "The suggestion was already reviewed."}
}
