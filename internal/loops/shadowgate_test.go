package loops_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/loops"
	"github.com/curate/curate/internal/shadow"
)

// A shadow gate waits for its queries, fails a version whose shadow
// scores more than max_drop below what the alias served, and passes one
// within it, saying the difference and its interval.
func TestShadowVerdict(t *testing.T) {
	g := loops.ShadowGate{MinQueries: 50, MaxDrop: 0.02}
	ev := func(n int, mean float64, ci ...float64) shadow.Evidence {
		return shadow.Evidence{ShadowID: uuid.New(), Alias: "production", Difference: eval.Difference{Mean: &mean, CI: ci, N: n}}
	}
	if wait, fail, detail := loops.ShadowVerdict(g, shadow.Evidence{}, false); !wait || fail != "" || !strings.Contains(detail, "0 of 50 queries") {
		t.Errorf("no shadow: wait %v, fail %q, detail %q", wait, fail, detail)
	}
	if wait, _, detail := loops.ShadowVerdict(g, ev(49, 0.2, 0.1, 0.3), true); !wait || !strings.Contains(detail, "49 of 50") {
		t.Errorf("49 queries: wait %v, detail %q", wait, detail)
	}
	wait, fail, _ := loops.ShadowVerdict(g, ev(50, -0.05, -0.09, -0.01), true)
	if wait || !strings.Contains(fail, "-0.050 (95% interval -0.090 to -0.010)") || !strings.Contains(fail, "more than 0.020 below") {
		t.Errorf("a drop of 0.05: wait %v, fail %q", wait, fail)
	}
	wait, fail, detail := loops.ShadowVerdict(g, ev(50, -0.01, -0.04, 0.02), true)
	if wait || fail != "" || !strings.Contains(detail, "on 50 queries scores -0.010") {
		t.Errorf("a drop of 0.01: wait %v, fail %q, detail %q", wait, fail, detail)
	}
}
