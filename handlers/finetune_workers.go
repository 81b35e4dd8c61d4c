package handlers

import (
	"fmt"
	"strings"
	"time"

	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/servers"
	"github.com/curate/curate/views"
)

// workerViews are the GPU workers as the fine-tuning page's card shows
// them.
func workerViews(ws []finetune.GPUWorker) []views.FineTuneWorker {
	out := make([]views.FineTuneWorker, len(ws))
	for i, w := range ws {
		v := views.FineTuneWorker{Host: w.Host, Device: "unknown: the probe did not answer (the worker's log says why)", Memory: "—",
			Lacks: strings.Join(w.Lacks, ", "), Setting: fmt.Sprintf("device %s, %s", w.Device, views.Count(w.Slots, "slot", "slots")),
			LastSeen: ago(w.SeenAgo), SeenAt: views.When(w.LastSeen), Live: w.Live}
		if p := w.Probe; p != nil {
			v.Device = deviceLabel(p.Device)
			if p.GPUName != "" {
				v.GPU = p.GPUName
				if p.GPUCount > 1 {
					v.GPU += fmt.Sprintf(" × %d", p.GPUCount)
				}
			}
			if p.GPUMemoryBytes > 0 {
				v.Memory = gib(p.GPUMemoryBytes)
			}
			var found []string
			for _, f := range []struct{ name, version string }{{"Python", p.Python}, {"torch", p.Torch}, {"CUDA", p.CUDA},
				{"transformers", p.Transformers}, {"peft", p.PEFT}} {
				if f.version != "" {
					found = append(found, f.name+" "+f.version)
				}
			}
			v.Found = strings.Join(found, " · ")
		}
		out[i] = v
	}
	return out
}

func deviceLabel(d string) string {
	switch d {
	case "cuda":
		return "CUDA GPU"
	case "cpu":
		return "CPU"
	case "none":
		return "none (no torch)"
	}
	return d
}

// gib writes a size in whole GiB ("80 GiB"), or in MiB below one GiB.
func gib(bytes int64) string {
	if bytes < 1<<30 {
		return fmt.Sprintf("%.0f MiB", float64(bytes)/(1<<20))
	}
	return fmt.Sprintf("%.0f GiB", float64(bytes)/(1<<30))
}

// ago writes an age in words: "just now", "12 seconds ago", "3 minutes
// ago".
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return views.Count(int(d/time.Second), "second", "seconds") + " ago"
	case d < time.Hour:
		return views.Count(int(d/time.Minute), "minute", "minutes") + " ago"
	}
	return views.Count(int(d/time.Hour), "hour", "hours") + " ago"
}

// liveForText is the liveness window in words, for the card.
var liveForText = views.Count(int(servers.WorkerLiveFor/time.Second), "second", "seconds")

// workersLine describes, for the launch form, where local jobs would
// train: each live worker's device and where it runs ("CUDA GPU (NVIDIA
// H100 80GB HBM3, 80 GiB) on gpu-1"), or why none can.
func workersLine(ws []finetune.GPUWorker) string {
	var parts []string
	for _, w := range ws {
		if !w.Live {
			continue
		}
		v := workerViews([]finetune.GPUWorker{w})[0]
		part := v.Device
		if v.GPU != "" {
			part += " (" + v.GPU + ", " + v.Memory + ")"
		}
		part += " on " + w.Host
		if v.Lacks != "" {
			part += ", which lacks " + v.Lacks
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "none: no GPU worker is running"
	}
	return strings.Join(parts, "; ")
}
