package review

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/rubrics"
)

// Rubric questions under overlapping review: when an item's reviews are
// all in, the reviewers' answers to each rubric question are compared as
// its labels are (a rating within the plan's rating tolerance agrees,
// anything else must be equal); a question they answer differently is a
// disagreement of its own ("question:<key>"), and the adjudicator decides
// it by choosing one of the answers given, which is recorded as the
// item's adjudicated answers.

// QuestionPrefix marks a rubric question among an item's disagreements.
const QuestionPrefix = "question:"

// answerDisagreements are the rubric questions an item's reviewers
// answered differently, as disagreements.
func answerDisagreements(ctx context.Context, q *db.Queries, orgID, feedbackID uuid.UUID, reviewers []uuid.UUID, rules Rules) ([]string, error) {
	rows, err := q.RubricAnswerListByFeedback(ctx, db.RubricAnswerListByFeedbackParams{OrgID: orgID, FeedbackID: feedbackID})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	keys := map[string]bool{}
	for _, id := range reviewers {
		keys["user:"+id.String()] = true
	}
	byRubric := map[uuid.UUID][]map[string]json.RawMessage{}
	var order []uuid.UUID
	for _, r := range rows {
		if r.Adjudicated || !keys[r.ReviewerKey] {
			continue
		}
		var vals map[string]json.RawMessage
		if json.Unmarshal(r.Answers, &vals) != nil {
			continue
		}
		if _, ok := byRubric[r.RubricID]; !ok {
			order = append(order, r.RubricID)
		}
		byRubric[r.RubricID] = append(byRubric[r.RubricID], vals)
	}
	var out []string
	for _, id := range order {
		answers := byRubric[id]
		if len(answers) < 2 {
			continue
		}
		rv, err := q.RubricGet(ctx, db.RubricGetParams{OrgID: orgID, ID: id})
		if err != nil {
			return nil, err
		}
		r, err := rubrics.FromVersion(rv)
		if err != nil {
			return nil, err
		}
		for _, question := range r.Questions {
			if question.Kind == rubrics.KindText {
				continue // free text is read, not compared
			}
			var given []json.RawMessage
			for _, a := range answers {
				if v, ok := a[question.Key]; ok {
					given = append(given, v)
				}
			}
			if disagree(question, given, rules) && !slices.Contains(out, QuestionPrefix+question.Key) {
				out = append(out, QuestionPrefix+question.Key)
			}
		}
	}
	return out, nil
}

// disagree reports whether answers to one question differ.
func disagree(q rubrics.Question, given []json.RawMessage, rules Rules) bool {
	for i := 1; i < len(given); i++ {
		if q.Kind == rubrics.KindRating {
			var a, b float64
			if json.Unmarshal(given[0], &a) == nil && json.Unmarshal(given[i], &b) == nil && math.Abs(a-b) <= float64(rules.RatingTolerance) {
				continue
			}
		}
		if !bytes.Equal(compact(given[0]), compact(given[i])) {
			return true
		}
	}
	return false
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// DisputedQuestion is a rubric question an item's reviewers disagree on,
// with each reviewer's answer.
type DisputedQuestion struct {
	RubricID uuid.UUID
	Rubric   string
	Question rubrics.Question
	Answers  []GivenAnswer
}

// GivenAnswer is one reviewer's answer to a question.
type GivenAnswer struct {
	Reviewer    string
	Value       json.RawMessage
	Adjudicated bool
}

// disputedQuestions are the questions among an item's disagreements, with
// the answers given (and, decided, the adjudicator's).
func disputedQuestions(ctx context.Context, q *db.Queries, orgID, feedbackID uuid.UUID, disagreements []string) ([]DisputedQuestion, error) {
	var keys []string
	for _, d := range disagreements {
		if k, ok := strings.CutPrefix(d, QuestionPrefix); ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := q.RubricAnswerListByFeedback(ctx, db.RubricAnswerListByFeedbackParams{OrgID: orgID, FeedbackID: feedbackID})
	if err != nil {
		return nil, err
	}
	rubricOf := map[uuid.UUID]rubrics.Rubric{}
	var out []DisputedQuestion
	index := map[string]int{}
	for _, row := range rows {
		r, ok := rubricOf[row.RubricID]
		if !ok {
			rv, err := q.RubricGet(ctx, db.RubricGetParams{OrgID: orgID, ID: row.RubricID})
			if err != nil {
				return nil, err
			}
			if r, err = rubrics.FromVersion(rv); err != nil {
				return nil, err
			}
			rubricOf[row.RubricID] = r
		}
		var vals map[string]json.RawMessage
		if json.Unmarshal(row.Answers, &vals) != nil {
			continue
		}
		for _, k := range keys {
			question, ok := r.Question(k)
			v, given := vals[k]
			if !ok || !given {
				continue
			}
			at := row.RubricID.String() + "/" + k
			i, seen := index[at]
			if !seen {
				i = len(out)
				index[at] = i
				out = append(out, DisputedQuestion{RubricID: row.RubricID, Rubric: r.Name, Question: question})
			}
			out[i].Answers = append(out[i].Answers, GivenAnswer{Reviewer: row.ReviewerLabel, Value: v, Adjudicated: row.Adjudicated})
		}
	}
	return out, nil
}

// decideQuestions records the adjudicator's answers for an item's
// disputed questions: for each rubric, the answers the reviewers agreed
// on (the first reviewer's) with the decided ones in their place.
// chosen is by rubric, then question key; every disputed question must
// have one, and each must be one of the answers given.
func decideQuestions(ctx context.Context, q *db.Queries, actor audit.Actor, orgID, feedbackID uuid.UUID, disagreements []string,
	chosen map[uuid.UUID]map[string]json.RawMessage) error {
	disputed, err := disputedQuestions(ctx, q, orgID, feedbackID, disagreements)
	if err != nil || len(disputed) == 0 {
		return err
	}
	v := &errs.Invalid{}
	for _, d := range disputed {
		pick, ok := chosen[d.RubricID][d.Question.Key]
		field := "answers." + d.Question.Key
		if !ok {
			v.Add(field, "choose the answer the item takes to “%s”", d.Question.Title)
			continue
		}
		if !slices.ContainsFunc(d.Answers, func(a GivenAnswer) bool { return !a.Adjudicated && bytes.Equal(compact(a.Value), compact(pick)) }) {
			v.Add(field, "must be one of the answers the reviewers gave")
		}
	}
	if v.Has() {
		return v
	}
	rows, err := q.RubricAnswerListByFeedback(ctx, db.RubricAnswerListByFeedbackParams{OrgID: orgID, FeedbackID: feedbackID})
	if err != nil {
		return err
	}
	merged := map[uuid.UUID]map[string]json.RawMessage{}
	version := map[uuid.UUID]int32{}
	for _, row := range rows {
		if row.Adjudicated {
			continue
		}
		if _, ok := merged[row.RubricID]; ok {
			continue
		}
		vals := map[string]json.RawMessage{}
		if err := json.Unmarshal(row.Answers, &vals); err != nil {
			return fmt.Errorf("answers %d: %w", row.ID, err)
		}
		merged[row.RubricID], version[row.RubricID] = vals, row.RubricVersion
	}
	for _, d := range disputed {
		merged[d.RubricID][d.Question.Key] = chosen[d.RubricID][d.Question.Key]
	}
	who := uuid.NullUUID{UUID: actor.ID, Valid: actor.Kind == "user" && actor.ID != uuid.Nil}
	for _, d := range disputed {
		vals, ok := merged[d.RubricID]
		if !ok {
			continue
		}
		body, err := json.Marshal(vals)
		if err != nil {
			return err
		}
		if _, err := q.RubricAnswerInsertOrUpdate(ctx, db.RubricAnswerInsertOrUpdateParams{OrgID: orgID, FeedbackID: feedbackID,
			RubricID: d.RubricID, RubricVersion: version[d.RubricID], ReviewerKey: rubrics.AdjudicationKey, ReviewerID: who,
			ReviewerLabel: actor.Label, Adjudicated: true, Answers: body}); err != nil {
			return err
		}
		delete(merged, d.RubricID)
	}
	return nil
}
