package loops

import (
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/experiments"
)

// The experiment a rollout step sets up carries the policy's plan, and its
// units per arm as the least sample per arm: a plan of 2 units per arm
// makes a panel that waits for 2, not the default 100.
func TestRolloutExperimentTakesThePlan(t *testing.T) {
	prod, version := uuid.New(), uuid.New()
	sp := Spec{Name: "support-weekly", Rollout: &RolloutSpec{Rollout: experiments.Rollout{Steps: []float64{0.5, 1}, HoldMins: 0, MinUnits: 2},
		Metrics: []string{"thumbs_up_rate"}, Guardrails: []string{"latency"}}}
	in := rolloutExperiment(sp, "support-weekly-3", 3, prod, version)
	if in.MinSamplePerArm == nil || *in.MinSamplePerArm != 2 {
		t.Errorf("least sample per arm %v, want the plan's 2", in.MinSamplePerArm)
	}
	if in.Rollout == nil || in.Rollout.MinUnits != 2 || len(in.Rollout.Steps) != 2 || in.ControlModelID != prod || in.TreatmentModelID != version ||
		in.Key != "support-weekly-3" || in.Name != "Rollout of support-weekly run #3" || in.Metrics[0] != "thumbs_up_rate" || in.Guardrails[0] != "latency" {
		t.Errorf("the experiment %+v", in)
	}
	// A plan with one unit per arm asks for the least an experiment takes.
	sp.Rollout.MinUnits = 1
	if in := rolloutExperiment(sp, "k", 1, prod, version); *in.MinSamplePerArm != 2 {
		t.Errorf("one unit per arm gives a least sample of %d, want 2", *in.MinSamplePerArm)
	}
	// No units named: the experiment's own default.
	sp.Rollout.MinUnits = 0
	if in := rolloutExperiment(sp, "k", 1, prod, version); in.MinSamplePerArm != nil {
		t.Errorf("no units per arm named gives %d", *in.MinSamplePerArm)
	}
}
