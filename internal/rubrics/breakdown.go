package rubrics

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
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
