package rubrics

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
)

// ExportLine is one line of a rubric's answers export: the item and one
// reviewer's (or the adjudicator's) answers, keys in a fixed order.
type ExportLine struct {
	FeedbackID    uuid.UUID       `json:"feedback_id"`
	Query         string          `json:"query"`
	Response      string          `json:"response"`
	Model         string          `json:"model"`
	Tags          []string        `json:"tags"`
	Status        string          `json:"status"`
	Rubric        string          `json:"rubric"`
	RubricID      uuid.UUID       `json:"rubric_id"`
	RubricVersion int             `json:"rubric_version"`
	Reviewer      string          `json:"reviewer"`
	Adjudicated   bool            `json:"adjudicated"`
	AnsweredAt    time.Time       `json:"answered_at"`
	Answers       json.RawMessage `json:"answers"`
}

// exportBatch is how many answers one query reads.
const exportBatch = 1000

// Export writes a rubric's answers with their items as JSON Lines, in the
// order they were first given, leaving out items whose overlapping review
// is still open. It returns the lines written.
func (s *Service) Export(ctx context.Context, orgID, rubricID uuid.UUID, w io.Writer) (int, error) {
	r, err := s.Get(ctx, orgID, rubricID)
	if err != nil {
		return 0, err
	}
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	q := db.New(s.Pool)
	n := 0
	var after int64
	for {
		rows, err := q.RubricAnswerListForExport(ctx, db.RubricAnswerListForExportParams{OrgID: orgID, RubricID: rubricID,
			AfterID: after, RowLimit: exportBatch})
		if err != nil {
			return n, err
		}
		for _, row := range rows {
			if err := enc.Encode(ExportLine{FeedbackID: row.FeedbackID, Query: row.Query, Response: row.Response, Model: row.Model,
				Tags: row.Tags, Status: string(row.Status), Rubric: r.Name, RubricID: rubricID, RubricVersion: int(row.RubricVersion),
				Reviewer: row.ReviewerLabel, Adjudicated: row.Adjudicated, AnsweredAt: row.UpdatedAt, Answers: row.Answers}); err != nil {
				return n, err
			}
			n++
			after = row.ID
		}
		if len(rows) < exportBatch {
			return n, out.Flush()
		}
	}
}
