package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// ProbeInfo is what `python -m curate_trainer probe` reports about this
// machine.
type ProbeInfo struct {
	Device         string `json:"device"` // "cuda", "cpu", or "none" without torch
	GPUName        string `json:"gpu_name,omitempty"`
	GPUMemoryBytes int64  `json:"gpu_memory_bytes,omitempty"`
	GPUCount       int    `json:"gpu_count,omitempty"`
	CUDA           string `json:"cuda,omitempty"`
	BF16           bool   `json:"bf16,omitempty"`
	Python         string `json:"python"`
	Torch          string `json:"torch,omitempty"`
	Transformers   string `json:"transformers,omitempty"`
	PEFT           string `json:"peft,omitempty"`
	Note           string `json:"note,omitempty"` // why runs cannot work here, when they cannot
}

// maxProbeOutput bounds what the probe may print.
const maxProbeOutput = 1 << 20

// Probe runs the trainer's probe and returns its report: the trainer that
// jobs run, so a Command ending in "run" is asked with "probe" in its
// place, and otherwise the bundled trainer with the configured Python and
// trainer directory.
func (p *Provider) Probe(ctx context.Context) (ProbeInfo, error) {
	argv := []string{p.cfg.Python, "-m", "curate_trainer", "probe"}
	if n := len(p.argv); n > 0 && p.argv[n-1] == "run" {
		argv = append(append([]string(nil), p.argv[:n-1]...), "probe")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = p.env
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxProbeOutput, maxProbeOutput
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	for _, line := range strings.Split(stdout.String(), "\n") {
		var info struct {
			Event string `json:"event"`
			ProbeInfo
		}
		if json.Unmarshal([]byte(line), &info) == nil && info.Event == "probe" {
			return info.ProbeInfo, nil
		}
	}
	msg := strings.TrimSpace(stderr.String())
	if len(msg) > logTailBytes {
		msg = msg[len(msg)-logTailBytes:]
	}
	if runErr != nil {
		return ProbeInfo{}, fmt.Errorf("local: probe: %s: %w: %s", p.cfg.Python, runErr, msg)
	}
	return ProbeInfo{}, fmt.Errorf("local: probe: %s printed no probe event: %s", p.cfg.Python, msg)
}

// limitedBuffer keeps the first max bytes written and drops the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// CannotRun says, as a sentence, why the probed machine cannot train, or
// "" when it can: the bundled trainer needs torch, and a device to run on.
func (i ProbeInfo) CannotRun() string {
	switch {
	case i.Note != "":
		return strings.ToUpper(i.Note[:1]) + strings.TrimSuffix(i.Note[1:], ".") + "."
	case i.Device == "none" || i.Torch == "":
		return "Torch is not installed, so this machine cannot run the local trainer."
	}
	return ""
}
