package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/livescore"
)

// LiveSampleWorker samples the feedback that arrived for every live
// scorer (livescore.SampleAll); it runs every minute.
type LiveSampleWorker struct {
	river.WorkerDefaults[livescore.SampleArgs]
	LiveScore *livescore.Service
}

// Work samples once.
func (w *LiveSampleWorker) Work(ctx context.Context, _ *river.Job[livescore.SampleArgs]) error {
	return w.LiveScore.SampleAll(ctx)
}

// LiveScoreWorker scores one scorer's sampled answers.
type LiveScoreWorker struct {
	river.WorkerDefaults[livescore.ScoreArgs]
	LiveScore *livescore.Service
}

// Timeout lets a scoring job run through its sample; the next job takes
// what is left.
func (w *LiveScoreWorker) Timeout(*river.Job[livescore.ScoreArgs]) time.Duration {
	return livescore.ScoreTimeout
}

// Work scores the scorer's pending answers. Claims made before this
// attempt started are a killed attempt's (one scoring job per scorer runs
// at a time), so the retry takes them over.
func (w *LiveScoreWorker) Work(ctx context.Context, job *river.Job[livescore.ScoreArgs]) error {
	var started time.Time
	if job.AttemptedAt != nil {
		started = *job.AttemptedAt
	}
	return w.LiveScore.Score(ctx, job.Args.ScorerID, started)
}
