package datasets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/rubrics"
)

// AnswerCondition keeps, of the items a filter matches, those whose
// settled answer to one rubric question is a value ("only items where
// urgency_missed = none"): the adjudicated answer where an adjudicator
// decided the question, otherwise the reviewers' answer when all who
// answered it agree. It takes a label or a rating question (the label or
// the rating), or a labels question (one label the answer includes).
type AnswerCondition struct {
	RubricID uuid.UUID
	Question string
	Answer   string
}

// Parameters of an answer condition in a dataset's filter.
const (
	ParamRubric   = "rubric_id"
	ParamQuestion = "rubric_question"
	ParamAnswer   = "rubric_answer"
)

// parseAnswerCondition reads an answer condition from a filter's
// parameters; nil when none is asked.
func parseAnswerCondition(params url.Values) (*AnswerCondition, error) {
	rid, key, ans := strings.TrimSpace(params.Get(ParamRubric)), strings.TrimSpace(params.Get(ParamQuestion)), strings.TrimSpace(params.Get(ParamAnswer))
	if rid == "" && key == "" && ans == "" {
		return nil, nil
	}
	v := &errs.Invalid{}
	id, err := uuid.Parse(rid)
	if err != nil {
		v.Add(ParamRubric, "must be a rubric's id, with %s and %s", ParamQuestion, ParamAnswer)
	}
	if key == "" {
		v.Add(ParamQuestion, "is required with %s: the key of one of its questions", ParamRubric)
	}
	if ans == "" {
		v.Add(ParamAnswer, "is required with %s: the answer the items must have", ParamQuestion)
	}
	if v.Has() {
		return nil, v
	}
	return &AnswerCondition{RubricID: id, Question: key, Answer: ans}, nil
}

// values is the condition as filter parameters, for the saved filter.
func (c *AnswerCondition) values(into url.Values) {
	if c == nil {
		return
	}
	into.Set(ParamRubric, c.RubricID.String())
	into.Set(ParamQuestion, c.Question)
	into.Set(ParamAnswer, c.Answer)
}

// keep is the items of ids whose settled answer meets the condition. An
// unknown rubric, question or answer is refused by
// its field.
func (c *AnswerCondition) keep(ctx context.Context, q *db.Queries, orgID uuid.UUID, ids []uuid.UUID) ([]uuid.UUID, error) {
	rv, err := q.RubricGet(ctx, db.RubricGetParams{OrgID: orgID, ID: c.RubricID})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.InvalidField(ParamRubric, "no rubric %s in this organisation", c.RubricID)
	}
	if err != nil {
		return nil, err
	}
	r, err := rubrics.FromVersion(rv)
	if err != nil {
		return nil, err
	}
	qn, ok := r.Question(c.Question)
	if !ok {
		keys := make([]string, 0, len(r.Questions))
		for _, x := range r.Questions {
			if x.Kind == rubrics.KindLabel || x.Kind == rubrics.KindLabels || x.Kind == rubrics.KindRating {
				keys = append(keys, x.Key)
			}
		}
		return nil, errs.InvalidField(ParamQuestion, "%s has no question %q; its label and rating questions are %s", r.Name, c.Question, strings.Join(keys, ", "))
	}
	var value any
	switch qn.Kind {
	case rubrics.KindLabel, rubrics.KindLabels:
		if !slices.Contains(qn.Options, c.Answer) {
			return nil, errs.InvalidField(ParamAnswer, "%q is not an answer to %s: one of %s", c.Answer, qn.Key, strings.Join(qn.Options, ", "))
		}
		value = c.Answer
	case rubrics.KindRating:
		lo, hi := qn.Bounds()
		n, err := strconv.Atoi(c.Answer)
		if err != nil || n < lo || n > hi {
			return nil, errs.InvalidField(ParamAnswer, "%s is a rating: a whole number from %d to %d", qn.Key, lo, hi)
		}
		value = n
	default:
		return nil, errs.InvalidField(ParamQuestion, "%s is a %s question: a dataset can be filtered by a label, labels or rating question", qn.Key, qn.Kind)
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return ids, nil
	}
	return q.RubricAnswerListFeedbackSettled(ctx, db.RubricAnswerListFeedbackSettledParams{OrgID: orgID, RubricID: c.RubricID, Ids: ids,
		Question: c.Question, Value: raw})
}

// settledAnswers is, for each item of a page, its settled rubric answers
// as the canonical JSON object a frozen example carries:
// {"<rubric name>": {"<question key>": answer}}. A question's settled
// answer is the adjudicated one where an adjudicator decided it, otherwise
// the reviewers' answer when every reviewer who answered it gave the same
// one; disputed questions are left out, and items with none are absent.
func settledAnswers(ctx context.Context, q *db.Queries, orgID uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]json.RawMessage, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.RubricAnswerListByFeedbackIDs(ctx, db.RubricAnswerListByFeedbackIDsParams{OrgID: orgID, Ids: ids})
	if err != nil {
		return nil, err
	}
	type given struct {
		value    json.RawMessage
		disputed bool
		decided  bool
	}
	byItem := map[uuid.UUID]map[string]map[string]*given{}
	for _, r := range rows {
		var answers map[string]json.RawMessage
		if err := json.Unmarshal(r.Answers, &answers); err != nil {
			return nil, fmt.Errorf("answers of %s: %w", r.FeedbackID, err)
		}
		rubric := byItem[r.FeedbackID]
		if rubric == nil {
			rubric = map[string]map[string]*given{}
			byItem[r.FeedbackID] = rubric
		}
		keys := rubric[r.RubricName]
		if keys == nil {
			keys = map[string]*given{}
			rubric[r.RubricName] = keys
		}
		for k, v := range answers {
			var c bytes.Buffer
			if err := json.Compact(&c, v); err != nil {
				return nil, err
			}
			g := keys[k]
			switch {
			case r.Adjudicated:
				keys[k] = &given{value: c.Bytes(), decided: true}
			case g == nil:
				keys[k] = &given{value: c.Bytes()}
			case !g.decided && !bytes.Equal(g.value, c.Bytes()):
				g.disputed = true
			}
		}
	}
	out := make(map[uuid.UUID]json.RawMessage, len(byItem))
	for id, rubric := range byItem {
		settled := map[string]map[string]json.RawMessage{}
		for name, keys := range rubric {
			for k, g := range keys {
				if g.disputed && !g.decided {
					continue
				}
				if settled[name] == nil {
					settled[name] = map[string]json.RawMessage{}
				}
				settled[name][k] = g.value
			}
		}
		if len(settled) == 0 {
			continue
		}
		raw, err := json.Marshal(settled)
		if err != nil {
			return nil, err
		}
		out[id] = raw
	}
	return out, nil
}
