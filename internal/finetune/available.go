package finetune

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/servers"
)

// NotConfigured is why a provider whose client cannot be built is not
// offered: its key, bucket, role or region is missing.
const NotConfigured = "credentials not configured"

// WorkerSource lists the workers as they last reported (servers.Service).
type WorkerSource interface {
	Workers(ctx context.Context) ([]servers.Worker, error)
}

// Unavailable says, for each provider that cannot take a job now, why, as
// the launch form shows it; a provider it leaves out can. The local
// trainer is refused when no live worker of the GPU queue can run it
// (LocalRefusal), whatever this server's own machine has: the web server
// of a scale-out need not have Python at all.
func (s *Service) Unavailable(ctx context.Context) map[string]string {
	out := map[string]string{}
	for _, name := range s.Providers.Names() {
		why, err := s.unavailable(ctx, name, "")
		if err != nil {
			// The launch itself reads the workers again and reports the
			// error; the form offers the provider meanwhile.
			s.log().Warn("reading the workers for the launch form", "err", err)
		}
		if why != "" {
			out[name] = why
		}
	}
	return out
}

// unavailable says why provider name cannot take a job with method m (""
// for any method) now, or "" when it can.
func (s *Service) unavailable(ctx context.Context, name string, m provider.Method) (string, error) {
	if _, _, err := s.client(ctx, name); err != nil {
		// The client's words name settings and variables: the log keeps
		// them, the form says what it means.
		s.log().Debug("fine-tuning provider not configured", "provider", name, "err", err)
		return NotConfigured, nil
	}
	if name != local.Name {
		return "", nil
	}
	return s.LocalRefusal(ctx, m)
}

// GPUWorker is a worker of the GPU queue as the fine-tuning pages show it.
type GPUWorker struct {
	servers.Worker
	// Lacks names what it lacks to run the local trainer (see
	// local.ProbeInfo.Lacks; NoProbe when its probe did not answer);
	// empty when it can train.
	Lacks []string
}

// NoProbe is what a worker whose trainer did not answer its probe lacks:
// nothing says it can train.
const NoProbe = "a trainer that answers its probe"

// GPUWorkers lists the workers seen within the last hour with what each
// lacks to run a local job of any method, the live ones first, each by
// host; none without a worker source.
func (s *Service) GPUWorkers(ctx context.Context) ([]GPUWorker, error) {
	return s.gpuWorkers(ctx, "")
}

func (s *Service) gpuWorkers(ctx context.Context, m provider.Method) ([]GPUWorker, error) {
	if s.Workers == nil {
		return nil, nil
	}
	ws, err := s.Workers.Workers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]GPUWorker, len(ws))
	for i, w := range ws {
		out[i] = GPUWorker{Worker: w, Lacks: []string{NoProbe}}
		if w.Probe != nil {
			out[i].Lacks = w.Probe.Lacks(m, w.Device)
		}
	}
	return out, nil
}

// LocalRefusal says, as a sentence, why no live worker can run a local job
// with method m ("" for any method), naming what is missing: "No live GPU
// worker has peft."; "" when one can. A worker counts while it beats
// (servers.WorkerLiveFor); one that stopped does not, whatever it
// reported. Without a worker source nothing is refused.
func (s *Service) LocalRefusal(ctx context.Context, m provider.Method) (string, error) {
	if s.Workers == nil {
		return "", nil
	}
	ws, err := s.gpuWorkers(ctx, m)
	if err != nil {
		return "", err
	}
	var live []GPUWorker
	for _, w := range ws {
		if !w.Live {
			continue
		}
		if len(w.Lacks) == 0 {
			return "", nil
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		return fmt.Sprintf("No GPU worker is running (none has reported in the last %.0f seconds); "+
			"start curate worker, or curate serve with workers, on a machine that can run the trainer.", servers.WorkerLiveFor.Seconds()), nil
	}
	// What every live worker lacks alike is named once; otherwise each
	// worker says what it lacks.
	same := true
	for _, w := range live[1:] {
		same = same && slices.Equal(w.Lacks, live[0].Lacks)
	}
	if same {
		return "No live GPU worker has " + and(live[0].Lacks) + ".", nil
	}
	parts := make([]string, len(live))
	for i, w := range live {
		parts[i] = w.Host + " lacks " + and(w.Lacks)
	}
	slices.Sort(parts)
	return "No live GPU worker can run it: " + strings.Join(parts, "; ") + ".", nil
}

// and joins words as a sentence lists them: "torch", "transformers and
// peft", "torch, transformers and peft".
func and(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// WorkerDevice is the device local jobs train on, as the live workers
// that can run them report it: "cuda" or "cpu" when they agree, "none"
// when live workers lack torch, "unknown" otherwise.
func (s *Service) WorkerDevice(ctx context.Context) (string, error) {
	ws, err := s.GPUWorkers(ctx)
	if err != nil {
		return "", err
	}
	devices := map[string]bool{}
	noTorch := false
	for _, w := range ws {
		switch {
		case !w.Live:
		case len(w.Lacks) == 0 && w.Device != "auto":
			devices[w.Device] = true
		case len(w.Lacks) == 0:
			devices[w.Probe.Device] = true
		case w.Probe != nil && w.Probe.Torch == "":
			noTorch = true
		}
	}
	switch {
	case len(devices) == 1:
		for d := range devices {
			return d, nil
		}
	case len(devices) == 0 && noTorch:
		return "none", nil
	}
	return "unknown", nil
}
