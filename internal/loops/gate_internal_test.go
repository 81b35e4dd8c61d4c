package loops

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/shadow"
)

// shadows answers one version's shadow evidence.
type shadows struct {
	version uuid.UUID
	ev      shadow.Evidence
}

func (s shadows) Evidence(_ context.Context, _, version uuid.UUID) (shadow.Evidence, bool, error) {
	return s.ev, version == s.version && s.ev.Difference.N > 0, nil
}

// The gate step reads a version's shadow when the policy asks for one:
// it waits for the queries, fails a version whose shadow falls too far,
// and passes one within the drop, linking the shadow; a policy that asks
// for none never reads it.
func TestGateStepReadsTheShadow(t *testing.T) {
	version := uuid.New()
	mean, drop := 0.05, -0.2
	st := func(g *ShadowGate) step {
		return step{run: db.LoopRun{OrgID: uuid.New(), ModelVersionID: uuid.NullUUID{UUID: version, Valid: true}},
			spec: Spec{Evaluation: Evaluation{Shadow: g}}}
	}
	gate := &ShadowGate{MinQueries: 50, MaxDrop: 0.02}
	for _, tc := range []struct {
		name    string
		ev      shadow.Evidence
		gate    *ShadowGate
		outcome string // done, wait or fail
		says    string
	}{
		{"no shadow asked for", shadow.Evidence{}, nil, "done", "no evaluation gate"},
		{"no shadow yet", shadow.Evidence{}, gate, "wait", "0 of 50 queries"},
		{"too few queries", shadow.Evidence{Alias: "production", Difference: eval.Difference{Mean: &mean, N: 20}}, gate, "wait", "20 of 50"},
		{"a fall", shadow.Evidence{Alias: "production", Difference: eval.Difference{Mean: &drop, CI: []float64{-0.3, -0.1}, N: 50}}, gate, "fail", "shadow blocks it"},
		{"a rise", shadow.Evidence{Alias: "production", Difference: eval.Difference{Mean: &mean, CI: []float64{0.01, 0.09}, N: 60}}, gate, "done", "on 60 queries scores +0.050"},
	} {
		tc.ev.ShadowID = uuid.New()
		s := &Service{Services: Services{Models: &models.Service{}, Shadows: shadows{version: version, ev: tc.ev}}}
		res, err := s.gateStep(context.Background(), st(tc.gate))
		if err != nil {
			t.Fatal(err)
		}
		outcome := map[bool]string{true: "done"}[res.done]
		if res.wait {
			outcome = "wait"
		} else if res.fail != "" {
			outcome = "fail"
		}
		text := res.detail + res.fail
		if outcome != tc.outcome || !strings.Contains(text, tc.says) {
			t.Errorf("%s: %s %q, want %s saying %q", tc.name, outcome, text, tc.outcome, tc.says)
		}
		if tc.outcome == "done" && tc.gate != nil && res.links["shadow_id"] != tc.ev.ShadowID.String() {
			t.Errorf("%s: links %v", tc.name, res.links)
		}
	}
}
