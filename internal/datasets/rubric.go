package datasets

import (
	"context"
	"encoding/json"
	"errors"
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
