package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"unicode/utf8"

	"github.com/curate/curate/internal/provider"
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
	Unsloth        string `json:"unsloth,omitempty"` // its version, when installed
	Note           string `json:"note,omitempty"`    // why runs cannot work here, when they cannot
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

// Needs names the Python packages the bundled trainer needs to train with
// method m: today every method's run imports torch, transformers and peft
// before anything else (trainer/curate_trainer/runtime.py).
func Needs(provider.Method) []string {
	return []string{"torch", "transformers", "peft"}
}

// NeedsGPU is what Lacks names when device asks for CUDA and the machine
// has none.
const NeedsGPU = "a CUDA GPU"

// Lacks names what the probed machine lacks to train with method m when
// its trainer's device setting (CURATE_TRAINER_DEVICE) is device: each
// package of Needs(m) the probe did not find, and NeedsGPU when device is
// "cuda" and torch sees no GPU ("auto" trains on the CPU then). Without
// torch the probe looks no further, so torch alone is named. Nil when it
// lacks nothing.
func (i ProbeInfo) Lacks(m provider.Method, device string) []string {
	if i.Torch == "" {
		return []string{"torch"}
	}
	have := map[string]bool{"torch": true, "transformers": i.Transformers != "", "peft": i.PEFT != ""}
	var out []string
	for _, pkg := range Needs(m) {
		if !have[pkg] {
			out = append(out, pkg)
		}
	}
	if device == "cuda" && i.Device != "cuda" {
		out = append(out, NeedsGPU)
	}
	return out
}

// maxProbeText bounds each text a probe reports (a GPU's name, a
// version, its note): they are stored and shown.
const maxProbeText = 200

// Clean makes the report fit to store and show: every text valid UTF-8
// without NUL bytes (which PostgreSQL's text and jsonb refuse), at most
// 200 bytes, and no negative figure.
func (i ProbeInfo) Clean() ProbeInfo {
	for _, s := range []*string{&i.Device, &i.GPUName, &i.CUDA, &i.Python, &i.Torch, &i.Transformers, &i.PEFT, &i.Unsloth, &i.Note} {
		t := strings.ToValidUTF8(strings.ReplaceAll(*s, "\x00", ""), "\uFFFD")
		for len(t) > maxProbeText {
			_, n := utf8.DecodeLastRuneInString(t)
			t = t[:len(t)-n]
		}
		*s = t
	}
	i.GPUMemoryBytes, i.GPUCount = max(i.GPUMemoryBytes, 0), max(i.GPUCount, 0)
	return i
}
