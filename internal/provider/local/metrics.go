package local

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"

	"github.com/curate/curate/internal/provider"
)

// maxScanLine is the longest events.jsonl line held whole; a longer one
// is log text, and only its start is kept.
const maxScanLine = 1 << 20

// Metrics returns the training curve from the trainer's metric events,
// one StepMetric per step: the evaluation after an epoch reports the same
// step as its last training batch and is merged into it.
func (p *Provider) Metrics(ctx context.Context, jobID string) ([]provider.StepMetric, error) {
	r, err := p.runOf(jobID)
	if err != nil {
		return nil, err
	}
	var out []provider.StepMetric
	at := map[int]int{} // step -> index in out
	err = r.scanEvents(ctx, func(ev trainerEvent) {
		m := ev.stepMetric()
		if ev.Event != "metric" || m == nil {
			return
		}
		i, seen := at[m.Step]
		if !seen {
			at[m.Step] = len(out)
			out = append(out, *m)
			return
		}
		merge(&out[i], m)
	})
	if err != nil {
		return nil, fail("read metrics", false, err)
	}
	slices.SortStableFunc(out, func(a, b provider.StepMetric) int { return a.Step - b.Step })
	return out, nil
}

// merge fills into m what n measured.
func merge(m, n *provider.StepMetric) {
	if n.Epoch != 0 {
		m.Epoch = n.Epoch
	}
	for _, f := range []struct{ dst, src **float64 }{
		{&m.TrainLoss, &n.TrainLoss}, {&m.TrainAccuracy, &n.TrainAccuracy},
		{&m.ValidLoss, &n.ValidLoss}, {&m.ValidMeanTokenAccuracy, &n.ValidMeanTokenAccuracy},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
}

// lastArtifact returns the last model (not checkpoint) the trainer saved,
// absolute; "" when none.
func (r run) lastArtifact(ctx context.Context) (string, error) {
	var path string
	err := r.scanEvents(ctx, func(ev trainerEvent) {
		if ev.Event == "artifact" && ev.Kind != "checkpoint" && ev.Path != "" {
			path = r.resolve(ev.Path)
		}
	})
	return path, err
}

// scanEvents calls fn for each protocol event in events.jsonl, holding at
// most one line in memory.
func (r run) scanEvents(ctx context.Context, fn func(trainerEvent)) error {
	f, err := os.Open(r.path(eventsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var line []byte
	for lines := 0; ; lines++ {
		if lines%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		n, _, err := readLine(br, &line)
		if err != nil || n == 0 {
			return err
		}
		if ev, ok := parseEvent(line); ok {
			fn(ev)
		}
	}
}
