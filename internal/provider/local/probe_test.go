package local

import (
	"slices"
	"testing"

	"github.com/curate/curate/internal/provider"
)

// What a machine lacks to train follows the trainer's imports (torch,
// transformers, peft, in that order) and, when its device setting is
// cuda, a GPU torch can see; auto and cpu train on the CPU.
func TestProbeLacks(t *testing.T) {
	full := ProbeInfo{Device: "cpu", Python: "3.12.3", Torch: "2.5.1", Transformers: "4.46.3", PEFT: "0.13.2"}
	gpu := full
	gpu.Device, gpu.GPUName, gpu.GPUMemoryBytes = "cuda", "NVIDIA H100 80GB HBM3", 85520809984
	noPEFT, noBoth := full, full
	noPEFT.PEFT = ""
	noBoth.Transformers, noBoth.PEFT = "", ""
	noTorch := ProbeInfo{Device: "none", Python: "3.12.3", Note: "torch is not installed, so this machine cannot run the local trainer"}
	for _, tc := range []struct {
		name   string
		probe  ProbeInfo
		device string
		want   []string
	}{
		{"cpu, auto", full, "auto", nil},
		{"cpu, cpu", full, "cpu", nil},
		{"cpu, cuda", full, "cuda", []string{NeedsGPU}},
		{"gpu, cuda", gpu, "cuda", nil},
		{"gpu, cpu", gpu, "cpu", nil},
		{"no peft", noPEFT, "auto", []string{"peft"}},
		{"no peft, cuda on a cpu", noPEFT, "cuda", []string{"peft", NeedsGPU}},
		{"neither", noBoth, "auto", []string{"transformers", "peft"}},
		{"no torch", noTorch, "cuda", []string{"torch"}},
	} {
		for _, m := range []provider.Method{provider.Supervised, provider.DPO, Reward, IRS, GRPO, PPO} {
			if got := tc.probe.Lacks(m, tc.device); !slices.Equal(got, tc.want) {
				t.Errorf("%s, %s: lacks %q, want %q", tc.name, m, got, tc.want)
			}
		}
	}
}

// A report is cleaned before it is stored: no NUL, valid UTF-8, texts cut
// at 200 bytes on a character boundary, no negative figures.
func TestProbeClean(t *testing.T) {
	long := ""
	for len(long) < 199 {
		long += "a"
	}
	got := ProbeInfo{GPUName: long + "é", Note: "bad \xff byte\x00", GPUMemoryBytes: -1, GPUCount: -2, Torch: "2.5.1"}.Clean()
	if got.GPUName != long || got.Note != "bad \uFFFD byte" || got.GPUMemoryBytes != 0 || got.GPUCount != 0 || got.Torch != "2.5.1" {
		t.Errorf("cleaned %+v", got)
	}
}
