package finetune_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/curate/curate/internal/finetune"
)

func lines(s ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(s))
	for i, l := range s {
		out[i] = json.RawMessage(l)
	}
	return out
}

// The summaries read metrics.jsonl lines as the trainer writes them
// (trainer/README.md, "Events on stdout") and skip the others.
func TestRunSummaries(t *testing.T) {
	ls := lines(
		`{"ts":"t","phase":"TRAINING","step":1,"epoch":1,"loss":0.7,"lr":2e-05,"accuracy":0.5}`,
		`{"ts":"t","phase":"EVALUATING","step":2,"epoch":1,"eval_loss":0.5,"ranking_accuracy":0.75,"eval_mse":0.04,"eval_mae":0.15,"pearson":0.82,`+
			`"calibration":[{"lower":0.0,"upper":0.1,"count":0,"predicted":null,"observed":null},{"lower":0.1,"upper":0.2,"count":2,"predicted":0.15,"observed":0.5}],"calibration_error":0.35}`,
		`{"ts":"t","phase":"STOPPED","step":3,"epoch":2,"reason":"validation loss has not improved"}`,
		`{"ts":"t","phase":"EVALUATING","step":3,"best_epoch":1,"best_step":2,"best_eval_loss":0.5}`,
		`{"ts":"t","phase":"EVALUATING","step":0,"epoch":0,"heldout_score":0.5}`,
		`{"ts":"t","phase":"TRAINING","step":1,"epoch":1,"loss":-0.1,"lr":1e-05,"reward":0.3,"reward_std":0.2,"kl":0.0,"clip_fraction":0.0,"response_length":12.5,"reward_breakdown":{"rm":0.3}}`,
		`{"ts":"t","phase":"EVALUATING","step":1,"epoch":1,"heldout_score":0.4,"train_reward":0.3}`,
		`{"ts":"t","iter":1,"phase":"METRICS","avg_reward":2.1}`,
		`not json`,
	)
	r := finetune.RewardSummary(ls)
	if len(r.Points) != 1 || r.BestEpoch != 1 || *r.BestEvalLoss != 0.5 {
		t.Fatalf("reward summary %+v", r)
	}
	p := r.Points[0]
	if p.Epoch != 1 || *p.RankingAccuracy != 0.75 || *p.MSE != 0.04 || *p.MAE != 0.15 || *p.Pearson != 0.82 || *p.CalibrationError != 0.35 || len(p.Calibration) != 2 {
		t.Errorf("evaluation %+v", p)
	}
	if b := p.Calibration[1]; b.Count != 2 || *b.Predicted != 0.15 || *b.Observed != 0.5 || p.Calibration[0].Predicted != nil {
		t.Errorf("bins %+v", p.Calibration)
	}

	steps, checks := finetune.PolicySummary(ls)
	if len(steps) != 1 || *steps[0].Reward != 0.3 || *steps[0].KL != 0 || *steps[0].ClipFraction != 0 || steps[0].ValueLoss != nil ||
		!reflect.DeepEqual(steps[0].RewardBreakdown, map[string]float64{"rm": 0.3}) {
		t.Errorf("steps %+v", steps)
	}
	if len(checks) != 2 || checks[0].Step != 0 || *checks[0].Score != 0.5 || checks[0].TrainReward != nil || *checks[1].TrainReward != 0.3 {
		t.Errorf("checks %+v", checks)
	}
	if got := finetune.StopReasons(ls); !reflect.DeepEqual(got, []string{"validation loss has not improved"}) {
		t.Errorf("stop reasons %q", got)
	}
}

// Every method's training steps give their learning rate and gradient
// norm in step order (a step read twice keeps its last reading); the
// kept model and the stops come with their steps.
func TestOptimAndMarks(t *testing.T) {
	ls := lines(
		`{"ts":"t","phase":"TRAINING","step":2,"epoch":1,"loss":0.6,"lr":1e-05,"grad_norm":0.8}`,
		`{"ts":"t","phase":"TRAINING","step":1,"epoch":1,"loss":0.7,"lr":2e-05}`,
		`{"ts":"t","phase":"EVALUATING","step":2,"epoch":1,"eval_loss":0.5,"lr":9}`,
		`{"ts":"t","phase":"TRAINING","step":3,"epoch":2,"loss":0.5,"grad_norm":2.5}`,
		`{"ts":"t","phase":"TRAINING","step":2,"epoch":1,"loss":0.6,"lr":1.5e-05,"grad_norm":0.9}`,
		`{"ts":"t","phase":"TRAINING","step":4,"epoch":2,"loss":0.5}`,
		`{"ts":"t","phase":"STOPPED","step":3,"epoch":2,"reason":"validation loss has not improved"}`,
		`{"ts":"t","phase":"STOPPED","reason":"reward hacking"}`,
		`{"ts":"t","phase":"EVALUATING","step":3,"best_epoch":1,"best_step":2,"best_eval_loss":0.5}`,
	)
	f := func(v float64) *float64 { return &v }
	want := []finetune.OptimPoint{{Step: 1, LR: f(2e-05)}, {Step: 2, LR: f(1.5e-05), GradNorm: f(0.9)}, {Step: 3, GradNorm: f(2.5)}}
	if got := finetune.OptimSummary(ls); !reflect.DeepEqual(got, want) {
		t.Errorf("optimiser readings %+v", got)
	}
	kept, ok := finetune.KeptBest(ls)
	if !ok || kept.Epoch != 1 || kept.Step != 2 || *kept.EvalLoss != 0.5 {
		t.Errorf("kept %+v %v", kept, ok)
	}
	if _, ok := finetune.KeptBest(ls[:8]); ok {
		t.Error("a run that reported no best epoch kept one")
	}
	stops := finetune.Stops(ls)
	if len(stops) != 2 || *stops[0].Step != 3 || stops[0].Reason != "validation loss has not improved" || stops[1].Step != nil {
		t.Errorf("stops %+v", stops)
	}
}
