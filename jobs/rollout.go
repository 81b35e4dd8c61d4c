package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/experiments"
)

// RolloutWorker looks at every running rollout (experiments.CheckRollouts).
type RolloutWorker struct {
	river.WorkerDefaults[experiments.RolloutArgs]
	Experiments *experiments.Service
}

// Work checks the rollouts once.
func (w *RolloutWorker) Work(ctx context.Context, _ *river.Job[experiments.RolloutArgs]) error {
	return w.Experiments.CheckRollouts(ctx)
}

// SumsWorker folds the answers and scores that changed into the
// experiments' kept per-unit values (experiments.Service.FoldSums).
type SumsWorker struct {
	river.WorkerDefaults[experiments.SumsArgs]
	Experiments *experiments.Service
}

// Work folds once.
func (w *SumsWorker) Work(ctx context.Context, _ *river.Job[experiments.SumsArgs]) error {
	return w.Experiments.FoldSums(ctx)
}
