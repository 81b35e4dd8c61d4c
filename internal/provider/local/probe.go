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

// Probe runs the bundled trainer's probe with the configured Python and
// trainer directory and returns its report.
func (p *Provider) Probe(ctx context.Context) (ProbeInfo, error) {
	cmd := exec.CommandContext(ctx, p.cfg.Python, "-m", "curate_trainer", "probe")
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
