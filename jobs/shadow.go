package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/shadow"
)

// ShadowSampleWorker samples the queries that arrived for every running
// shadow (shadow.SampleAll); it runs every minute.
type ShadowSampleWorker struct {
	river.WorkerDefaults[shadow.SampleArgs]
	Shadows *shadow.Service
}

// Work samples once.
func (w *ShadowSampleWorker) Work(ctx context.Context, _ *river.Job[shadow.SampleArgs]) error {
	return w.Shadows.SampleAll(ctx)
}

// ShadowRunWorker mirrors one shadow's sampled queries to its candidate
// and scores both answers.
type ShadowRunWorker struct {
	river.WorkerDefaults[shadow.RunArgs]
	Shadows *shadow.Service
}

// Timeout lets a run go through its sample; the next run takes what is
// left.
func (w *ShadowRunWorker) Timeout(*river.Job[shadow.RunArgs]) time.Duration {
	return shadow.RunTimeout
}

// Work mirrors the shadow's open queries.
func (w *ShadowRunWorker) Work(ctx context.Context, job *river.Job[shadow.RunArgs]) error {
	return w.Shadows.Run(ctx, job.Args.ShadowID)
}
