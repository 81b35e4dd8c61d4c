package finetune

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
)

// Runtime is the machine a local job trains on, as the IRS design's train
// status shows it (seeds/003_8cd6d991c9e5fd8e.txt §4.2): the device,
// whether Unsloth is installed there, and the bytes of GPU memory the
// trainer last reported holding (0 off CUDA, or before it reports).
type Runtime struct {
	Device           string `json:"device"`
	UnslothAvailable bool   `json:"unsloth_available"`
	GPUMemUsed       int64  `json:"gpu_mem_used"`
}

// workerRuntime is what a job keeps of the worker that started it.
type workerRuntime struct {
	Device           string `json:"device"`
	UnslothAvailable bool   `json:"unsloth_available"`
}

// recordWorker stores on a local job this worker and what its trainer's
// probe last reported of the machine: the device the worker trains on
// (its own setting, or the probe's answer when that is auto) and whether
// Unsloth is installed.
func (s *Service) recordWorker(ctx context.Context, q *db.Queries, jobID uuid.UUID) error {
	if s.WorkerID == uuid.Nil {
		return nil
	}
	rt := workerRuntime{Device: "unknown"}
	if s.Workers != nil {
		ws, err := s.Workers.Workers(ctx)
		if err != nil {
			return err
		}
		for _, w := range ws {
			if w.ID != s.WorkerID {
				continue
			}
			if w.Device != "auto" {
				rt.Device = w.Device
			}
			if w.Probe != nil {
				if w.Device == "auto" {
					rt.Device = w.Probe.Device
				}
				rt.UnslothAvailable = w.Probe.Unsloth != ""
			}
		}
	}
	b, err := json.Marshal(rt)
	if err != nil {
		return err
	}
	return q.FineTuneJobUpdateWorker(ctx, db.FineTuneJobUpdateWorkerParams{ID: jobID, WorkerID: uuid.NullUUID{UUID: s.WorkerID, Valid: true},
		WorkerRuntime: b})
}

// JobRuntime is the runtime of a job: that of the worker that started
// it, with the GPU memory the trainer last reported in its metrics
// (lines, as RunMetrics reads them). A job no worker recorded (a
// provider's, or one not started yet) reports the live workers' device
// (WorkerDevice), no Unsloth and no memory.
func (s *Service) JobRuntime(ctx context.Context, j db.FineTuningJob, lines []json.RawMessage) (Runtime, error) {
	var rt Runtime
	if j.WorkerID.Valid {
		var w workerRuntime
		if err := json.Unmarshal(j.WorkerRuntime, &w); err == nil {
			rt.Device, rt.UnslothAvailable = w.Device, w.UnslothAvailable
		}
	}
	if rt.Device == "" {
		device, err := s.WorkerDevice(ctx)
		if err != nil {
			return rt, err
		}
		rt.Device = device
	}
	rt.GPUMemUsed = GPUMemUsed(lines)
	return rt, nil
}

// GPUMemUsed is the last gpu_mem_used the trainer's metrics report, 0
// when none does.
func GPUMemUsed(lines []json.RawMessage) int64 {
	var last int64
	for _, l := range lines {
		var m struct {
			GPUMemUsed *float64 `json:"gpu_mem_used"`
		}
		if json.Unmarshal(l, &m) == nil && m.GPUMemUsed != nil && *m.GPUMemUsed > 0 {
			last = int64(*m.GPUMemUsed)
		}
	}
	return last
}
