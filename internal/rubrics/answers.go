package rubrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// Span is a character range of the item's answer (code points, end
// exclusive) with its label.
type Span struct {
	Start int    `json:"start"`
	End   int    `json:"end"`
	Label string `json:"label"`
}

// Values are checked answers by question key: a label and a text are
// strings, labels and a ranking lists of strings, a rating an integer and
// a span a list of Span.
type Values map[string]any

// Check reads raw answers against a rubric's questions, for an item whose
// answer (the response spans are ranges of) is response. Every problem is
// named by its key (answers.<key>); an unanswered optional question is
// left out.
func (r Rubric) Check(raw map[string]json.RawMessage, response string) (Values, error) {
	v := &errs.Invalid{}
	out := Values{}
	for _, key := range sortedKeys(raw) {
		if _, ok := r.Question(key); !ok {
			v.Add("answers."+key, "is not a question of the rubric %q (version %d)", r.Name, r.Version)
		}
	}
	runes := utf8.RuneCountInString(response)
	for _, q := range r.Questions {
		field := "answers." + q.Key
		body, ok := raw[q.Key]
		if !ok || isNull(body) {
			if q.Required {
				v.Add(field, "is required: %s", q.Title)
			}
			continue
		}
		val, problem := q.read(body, runes)
		if problem != "" {
			v.Add(field, "%s", problem)
			continue
		}
		if val == nil {
			if q.Required {
				v.Add(field, "is required: %s", q.Title)
			}
			continue
		}
		out[q.Key] = val
	}
	return out, v.Err()
}

func isNull(b json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// read checks one answer; a nil value with no problem is an empty answer
// (no label chosen, an empty text, no span).
func (q Question) read(body json.RawMessage, runes int) (any, string) {
	switch q.Kind {
	case KindLabel:
		var s string
		if err := json.Unmarshal(body, &s); err != nil {
			return nil, "must be one of the options, as a string"
		}
		if s == "" {
			return nil, ""
		}
		if !slices.Contains(q.Options, s) {
			return nil, fmt.Sprintf("%q is not an option; choose one of %s", s, strings.Join(q.Options, ", "))
		}
		return s, ""
	case KindLabels:
		var list []string
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, "must be a list of the options"
		}
		seen := map[string]bool{}
		for _, s := range list {
			if !slices.Contains(q.Options, s) {
				return nil, fmt.Sprintf("%q is not an option; choose from %s", s, strings.Join(q.Options, ", "))
			}
			if seen[s] {
				return nil, fmt.Sprintf("%q is chosen twice", s)
			}
			seen[s] = true
		}
		if q.Min != nil && len(list) < *q.Min {
			return nil, fmt.Sprintf("choose at least %d", *q.Min)
		}
		if q.Max != nil && len(list) > *q.Max {
			return nil, fmt.Sprintf("choose at most %d", *q.Max)
		}
		if len(list) == 0 {
			return nil, ""
		}
		// The options' order, so that equal choices read the same.
		ordered := make([]string, 0, len(list))
		for _, o := range q.Options {
			if seen[o] {
				ordered = append(ordered, o)
			}
		}
		return ordered, ""
	case KindRating:
		var x float64
		if err := json.Unmarshal(body, &x); err != nil {
			return nil, "must be a whole number"
		}
		lo, hi := q.Bounds()
		if math.IsNaN(x) || math.IsInf(x, 0) || x != math.Trunc(x) || x < float64(lo) || x > float64(hi) {
			return nil, fmt.Sprintf("must be a whole number from %d to %d", lo, hi)
		}
		return int(x), ""
	case KindRanking:
		var list []string
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, "must be the options in order, best first"
		}
		if len(list) == 0 {
			return nil, ""
		}
		if len(list) != len(q.Options) {
			return nil, fmt.Sprintf("rank every option (%d), not %d", len(q.Options), len(list))
		}
		seen := map[string]bool{}
		for _, s := range list {
			if !slices.Contains(q.Options, s) || seen[s] {
				return nil, fmt.Sprintf("must hold each of %s once", strings.Join(q.Options, ", "))
			}
			seen[s] = true
		}
		return list, ""
	case KindText:
		var s string
		if err := json.Unmarshal(body, &s); err != nil {
			return nil, "must be a string"
		}
		s = strings.ReplaceAll(s, "\r\n", "\n")
		limit := MaxText
		if q.Max != nil && *q.Max > 0 && *q.Max < limit {
			limit = *q.Max
		}
		v := &errs.Invalid{}
		if !v.Text("x", s, limit*4, false) {
			return nil, v.Errors[0].Message
		}
		if n := utf8.RuneCountInString(s); n > limit {
			return nil, fmt.Sprintf("is %d characters; at most %d", n, limit)
		}
		if strings.TrimSpace(s) == "" {
			return nil, ""
		}
		return s, ""
	case KindSpan:
		var spans []Span
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spans); err != nil {
			return nil, `must be a list of {"start", "end", "label"}`
		}
		if len(spans) > MaxSpans {
			return nil, fmt.Sprintf("at most %d spans, not %d", MaxSpans, len(spans))
		}
		for i, s := range spans {
			switch {
			case s.Start < 0 || s.End <= s.Start || s.End > runes:
				return nil, fmt.Sprintf("span %d (%d–%d) must lie within the answer's %d characters, start before end", i, s.Start, s.End, runes)
			case len(q.Options) > 0 && !slices.Contains(q.Options, s.Label):
				return nil, fmt.Sprintf("span %d's label %q is not one of %s", i, s.Label, strings.Join(q.Options, ", "))
			case len(q.Options) == 0 && len(s.Label) > MaxOption:
				return nil, fmt.Sprintf("span %d's label is longer than %d bytes", i, MaxOption)
			case !utf8.ValidString(s.Label):
				return nil, fmt.Sprintf("span %d's label is not valid UTF-8", i)
			}
		}
		if len(spans) == 0 {
			return nil, ""
		}
		sort.SliceStable(spans, func(i, j int) bool {
			return spans[i].Start < spans[j].Start || (spans[i].Start == spans[j].Start && spans[i].End < spans[j].End)
		})
		return spans, ""
	}
	return nil, "is a question of an unknown kind"
}

// Answer is one reviewer's answers to a rubric for an item.
type Answer struct {
	FeedbackID    uuid.UUID       `json:"feedback_id"`
	RubricID      uuid.UUID       `json:"rubric_id"`
	RubricVersion int             `json:"rubric_version"`
	Reviewer      string          `json:"reviewer"`
	ReviewerKey   string          `json:"-"`
	Adjudicated   bool            `json:"adjudicated"`
	Answers       json.RawMessage `json:"answers"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

func toAnswer(a db.RubricAnswer) Answer {
	return Answer{FeedbackID: a.FeedbackID, RubricID: a.RubricID, RubricVersion: int(a.RubricVersion), Reviewer: a.ReviewerLabel,
		ReviewerKey: a.ReviewerKey, Adjudicated: a.Adjudicated, Answers: a.Answers, UpdatedAt: a.UpdatedAt}
}

// ReviewerKey is how answers know a reviewer: a user or an API key.
func ReviewerKey(actor audit.Actor) (string, error) {
	switch {
	case actor.Kind == "user" && actor.ID != uuid.Nil:
		return "user:" + actor.ID.String(), nil
	case actor.Kind == "api_key" && actor.ID != uuid.Nil:
		return "key:" + actor.ID.String(), nil
	}
	return "", errs.ErrForbidden
}

// AdjudicationKey is the reviewer key of an adjudicator's decision.
const AdjudicationKey = "adjudication"

// Answer records the caller's answers to a rubric's current version for
// an item, replacing any they gave before; all of them or none.
func (s *Service) Answer(ctx context.Context, actor audit.Actor, orgID, feedbackID, rubricID uuid.UUID, raw map[string]json.RawMessage) (Answer, error) {
	key, err := ReviewerKey(actor)
	if err != nil {
		return Answer{}, err
	}
	return s.record(ctx, actor, orgID, feedbackID, rubricID, raw, key, false)
}

// Adjudicate records an adjudicator's answers for an item: the answers
// the item takes where its reviewers disagreed.
func (s *Service) Adjudicate(ctx context.Context, actor audit.Actor, orgID, feedbackID, rubricID uuid.UUID, raw map[string]json.RawMessage) (Answer, error) {
	if _, err := ReviewerKey(actor); err != nil {
		return Answer{}, err
	}
	return s.record(ctx, actor, orgID, feedbackID, rubricID, raw, AdjudicationKey, true)
}

func (s *Service) record(ctx context.Context, actor audit.Actor, orgID, feedbackID, rubricID uuid.UUID, raw map[string]json.RawMessage, key string, adjudicated bool) (Answer, error) {
	if raw == nil {
		return Answer{}, errs.InvalidField("answers", "is required: an object of answers by question key")
	}
	var out Answer
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		r, err := current(ctx, q, orgID, rubricID)
		if err != nil {
			return err
		}
		out, err = recordTx(ctx, q, actor, orgID, feedbackID, r, raw, key, adjudicated)
		return err
	})
	return out, err
}

// current is a rubric at its current version; one of another
// organisation is refused by its field.
func current(ctx context.Context, q *db.Queries, orgID, rubricID uuid.UUID) (Rubric, error) {
	rv, err := q.RubricGet(ctx, db.RubricGetParams{OrgID: orgID, ID: rubricID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Rubric{}, errs.InvalidField("rubric_id", "no rubric %s in this organisation", rubricID)
	}
	if err != nil {
		return Rubric{}, err
	}
	return FromVersion(rv)
}

// recordTx checks and stores one item's answers in the caller's
// transaction.
func recordTx(ctx context.Context, q *db.Queries, actor audit.Actor, orgID, feedbackID uuid.UUID, r Rubric, raw map[string]json.RawMessage,
	key string, adjudicated bool) (Answer, error) {
	f, err := q.FeedbackGet(ctx, db.FeedbackGetParams{OrgID: orgID, ID: feedbackID})
	if err != nil {
		return Answer{}, errs.NotFound(err)
	}
	if !adjudicated && actor.Kind == "user" {
		// Under overlapping review a submitted review is final, its
		// answers with it: the item may be settled on them already.
		l, err := q.ReviewLabelGet(ctx, db.ReviewLabelGetParams{OrgID: orgID, FeedbackID: feedbackID, ReviewerID: actor.ID})
		switch {
		case err == nil && l.SubmittedAt != nil:
			return Answer{}, &errs.Conflict{Message: "you have submitted your review of this item: its answers are final with it"}
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return Answer{}, err
		}
	}
	vals, err := r.Check(raw, f.Feedback.Response)
	if err != nil {
		return Answer{}, err
	}
	body, err := json.Marshal(vals)
	if err != nil {
		return Answer{}, err
	}
	var who uuid.NullUUID
	if actor.Kind == "user" {
		who = uuid.NullUUID{UUID: actor.ID, Valid: true}
	}
	row, err := q.RubricAnswerInsertOrUpdate(ctx, db.RubricAnswerInsertOrUpdateParams{OrgID: orgID, FeedbackID: feedbackID,
		RubricID: r.ID, RubricVersion: int32(r.Version), ReviewerKey: key, ReviewerID: who, ReviewerLabel: actor.Label,
		Adjudicated: adjudicated, Answers: body})
	if err != nil {
		return Answer{}, err
	}
	action := "rubric.answer"
	if adjudicated {
		action = "rubric.adjudicate"
	}
	// The answers stay out of the log, as overlapping review's labels
	// do: reviews are blind until complete.
	return toAnswer(row), audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: action, TargetType: "feedback",
		TargetID: feedbackID.String(), Details: map[string]any{"rubric": r.ID, "version": r.Version, "questions": len(vals)}})
}

// MaxBulkAnswers bounds the items one bulk answer covers.
const MaxBulkAnswers = 500

// AnswerMany gives the same answers to a rubric for every item of a
// selection, all of them or none: an item the answers do not fit (a
// required question unanswered, an item of another organisation, one
// whose review the caller has submitted) refuses the whole. Spans are
// drawn on one item's answer, so a bulk answer holds none.
func (s *Service) AnswerMany(ctx context.Context, actor audit.Actor, orgID, rubricID uuid.UUID, ids []uuid.UUID, raw map[string]json.RawMessage) (int, error) {
	key, err := ReviewerKey(actor)
	if err != nil {
		return 0, err
	}
	v := &errs.Invalid{}
	switch {
	case len(ids) == 0:
		v.Add("feedback_ids", "choose at least one item")
	case len(ids) > MaxBulkAnswers:
		v.Add("feedback_ids", "at most %d items at once, not %d", MaxBulkAnswers, len(ids))
	}
	if raw == nil {
		v.Add("answers", "is required: an object of answers by question key")
	}
	if v.Has() {
		return 0, v
	}
	seen := map[uuid.UUID]bool{}
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		rv, err := q.RubricGet(ctx, db.RubricGetParams{OrgID: orgID, ID: rubricID})
		if err != nil {
			return errs.NotFound(err) // the rubric is the route's own
		}
		r, err := FromVersion(rv)
		if err != nil {
			return err
		}
		for _, question := range r.Questions {
			if _, ok := raw[question.Key]; ok && question.Kind == KindSpan {
				return errs.InvalidField("answers."+question.Key, "spans are drawn on one item's answer: answer them item by item")
			}
		}
		for i, id := range ids {
			if seen[id] {
				return errs.InvalidField(fmt.Sprintf("feedback_ids[%d]", i), "%s is listed twice", id)
			}
			seen[id] = true
			if _, err := recordTx(ctx, q, actor, orgID, id, r, raw, key, false); err != nil {
				if errors.Is(err, errs.ErrNotFound) {
					return errs.InvalidField(fmt.Sprintf("feedback_ids[%d]", i), "no item %s in this organisation", id)
				}
				var conflict *errs.Conflict
				if errors.As(err, &conflict) {
					return &errs.Conflict{Message: fmt.Sprintf("item %s: %s", id, conflict.Message)}
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(ids), nil
}

// ForItem is every answer given for an item, adjudications last; an item
// of another organisation is not found.
func (s *Service) ForItem(ctx context.Context, orgID, feedbackID uuid.UUID) ([]Answer, error) {
	q := db.New(s.Pool)
	if _, err := q.FeedbackGet(ctx, db.FeedbackGetParams{OrgID: orgID, ID: feedbackID}); err != nil {
		return nil, errs.NotFound(err)
	}
	rows, err := q.RubricAnswerListByFeedback(ctx, db.RubricAnswerListByFeedbackParams{OrgID: orgID, FeedbackID: feedbackID})
	if err != nil {
		return nil, err
	}
	out := make([]Answer, len(rows))
	for i, r := range rows {
		out[i] = toAnswer(r)
	}
	return out, nil
}
