package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The stand-in for OpenAI's API is linked into a binary built with -tags
// dev, as make run builds it, and into no other.
func TestStandInOnlyInDevBuilds(t *testing.T) {
	const standIn = "github.com/curate/curate/internal/provider/openaitest"
	for _, tc := range []struct {
		tags string
		want bool
	}{{"", false}, {"dev", true}} {
		out, err := exec.Command("go", "list", "-tags", tc.tags, "-deps", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		if got := strings.Contains("\n"+string(out), "\n"+standIn+"\n"); got != tc.want {
			t.Errorf("built with tags %q, the binary links the stand-in: %v, want %v", tc.tags, got, tc.want)
		}
	}
}
