package rubrics

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// MaxBreakdownAnswers bounds the answers one breakdown reads: the newest.
const MaxBreakdownAnswers = 50000

// ValueCount is how many answers gave one value.
type ValueCount struct {
	Value string
	N     int
}

// QuestionCounts is how a question was answered: each option (or rating)
// with its count, in the options' order, and how many answered at all.
type QuestionCounts struct {
	Question Question
	Answered int
	Counts   []ValueCount
}

// Breakdown counts the answers reviewers gave each label, labels and
// rating question of a rubric (texts, rankings and spans are read, not
// counted), over items whose reviews are not still open.
func (s *Service) Breakdown(ctx context.Context, orgID, rubricID uuid.UUID) ([]QuestionCounts, bool, error) {
	r, err := s.Get(ctx, orgID, rubricID)
	if err != nil {
		return nil, false, err
	}
	rows, err := db.New(s.Pool).RubricAnswerListForBreakdown(ctx, db.RubricAnswerListForBreakdownParams{OrgID: orgID, RubricID: rubricID,
		RowLimit: MaxBreakdownAnswers + 1})
	if err != nil {
		return nil, false, err
	}
	truncated := len(rows) > MaxBreakdownAnswers
	if truncated {
		rows = rows[:MaxBreakdownAnswers]
	}
	var out []QuestionCounts
	for _, q := range r.Questions {
		var values []string
		switch q.Kind {
		case KindLabel, KindLabels:
			values = q.Options
		case KindRating:
			lo, hi := q.Bounds()
			for x := lo; x <= hi; x++ {
				values = append(values, strconv.Itoa(x))
			}
		default:
			continue
		}
		qc := QuestionCounts{Question: q}
		counts := map[string]int{}
		for _, row := range rows {
			var answers map[string]json.RawMessage
			if json.Unmarshal(row, &answers) != nil {
				continue
			}
			v, ok := answers[q.Key]
			if !ok {
				continue
			}
			qc.Answered++
			var one string
			var many []string
			var n float64
			switch {
			case json.Unmarshal(v, &one) == nil:
				counts[one]++
			case json.Unmarshal(v, &many) == nil:
				for _, m := range many {
					counts[m]++
				}
			case json.Unmarshal(v, &n) == nil:
				counts[strconv.Itoa(int(n))]++
			}
		}
		for _, v := range values {
			qc.Counts = append(qc.Counts, ValueCount{Value: v, N: counts[v]})
		}
		out = append(out, qc)
	}
	return out, truncated, nil
}

// MaxItemsByAnswer bounds the items ItemsByAnswer lists: the newest.
const MaxItemsByAnswer = 200

// ItemRef is an item some answer gave a value.
type ItemRef struct {
	ID        uuid.UUID
	Query     string // cut short
	Status    string
	CreatedAt time.Time
	Answers   int // the answers that gave the value
}

// ItemsByAnswer lists the items (newest first) whose answers to a label,
// labels or rating question of the rubric gave value, over items whose
// reviews are not still open.
func (s *Service) ItemsByAnswer(ctx context.Context, orgID, rubricID uuid.UUID, key, value string) (Rubric, Question, []ItemRef, error) {
	r, err := s.Get(ctx, orgID, rubricID)
	if err != nil {
		return r, Question{}, nil, err
	}
	q, ok := r.Question(key)
	if !ok {
		return r, q, nil, errs.InvalidField("question", "the rubric %q has no question %q", r.Name, key)
	}
	switch q.Kind {
	case KindLabel, KindLabels:
		if !slices.Contains(q.Options, value) {
			return r, q, nil, errs.InvalidField("value", "must be one of %s", strings.Join(q.Options, ", "))
		}
	case KindRating:
		lo, hi := q.Bounds()
		if n, err := strconv.Atoi(value); err != nil || n < lo || n > hi {
			return r, q, nil, errs.InvalidField("value", "must be a whole number from %d to %d", lo, hi)
		}
	default:
		return r, q, nil, errs.InvalidField("question", "items are listed by the answers to a label, labels or rating question")
	}
	rows, err := db.New(s.Pool).RubricAnswerListFeedbackByValue(ctx, db.RubricAnswerListFeedbackByValueParams{OrgID: orgID,
		RubricID: rubricID, Question: key, Value: value, RowLimit: MaxItemsByAnswer})
	if err != nil {
		return r, q, nil, err
	}
	out := make([]ItemRef, len(rows))
	for i, row := range rows {
		out[i] = ItemRef{ID: row.ID, Query: row.QueryPreview, Status: string(row.Status), CreatedAt: row.CreatedAt, Answers: int(row.Answers)}
	}
	return r, q, out, nil
}
