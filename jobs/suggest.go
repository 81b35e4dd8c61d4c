package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/codebook"
)

// SuggestWorker asks the reflector for suggested codebook rules
// (codebook.Service.AnswerSuggestions). Each answer is stored as it comes
// and reused for the same question, so a retried attempt pays for none
// twice.
type SuggestWorker struct {
	river.WorkerDefaults[codebook.SuggestArgs]
	Codebooks *codebook.Service
}

// Timeout leaves room for a bulk request of 200 items at a slow judge.
func (w *SuggestWorker) Timeout(*river.Job[codebook.SuggestArgs]) time.Duration {
	return 30 * time.Minute
}

// Work answers the job's pending suggestions.
func (w *SuggestWorker) Work(ctx context.Context, job *river.Job[codebook.SuggestArgs]) error {
	return w.Codebooks.AnswerSuggestions(ctx, job.Args)
}
