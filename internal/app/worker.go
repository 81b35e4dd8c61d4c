package app

import (
	"cmp"
	"context"
	"os"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/servers"
)

// StartWorkerBeats records this process among the workers of the GPU queue,
// with what its trainer's probe reports, at once and then every
// servers.BeatEvery, so that any web server can tell whether a local
// launch has a worker to run it. serve (unless --workers=0) and worker
// call it before they take jobs; stop removes the process again.
func (s *Services) StartWorkerBeats(ctx context.Context) (stop func()) {
	host, err := os.Hostname()
	if err != nil {
		s.Log.Warn("this machine's host name is unknown", "err", err)
	}
	b := &servers.WorkerBeats{Servers: s.Servers, ProbeTrainer: s.FineTune.LocalProbe, Log: s.Log,
		Report: servers.WorkerReport{ID: uuid.New(), Host: host, Device: cmp.Or(s.Config.TrainerDevice, "auto"), Slots: max(s.Config.GPUSlots, 1)}}
	// The local jobs this process starts record it, and its runtime.
	s.FineTune.WorkerID = b.Report.ID
	return b.Start(ctx)
}
