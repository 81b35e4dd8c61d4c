package finetune

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/provider/local"
)

// LocalProbe asks the local trainer what it finds on this machine
// (torch, transformers, peft, the device): the trainer that jobs run, so
// a worker learns what it could train. It fails when the local provider
// is not configured or the probe cannot run; ctx bounds it.
func (s *Service) LocalProbe(ctx context.Context) (local.ProbeInfo, error) {
	p, _, err := s.client(ctx, local.Name)
	if err != nil {
		return local.ProbeInfo{}, err
	}
	lp, ok := p.(*local.Provider)
	if !ok {
		return local.ProbeInfo{}, errors.New("the local provider is not the local trainer")
	}
	return lp.Probe(ctx)
}

// maxRunMetrics bounds how many of a run's newest metrics records are
// read at once.
const maxRunMetrics = 20000

// RunMetrics returns a local job's metrics.jsonl lines, each a JSON object
// as the trainer wrote it, oldest first: all of them, or the newest 20,000.
// They come from the database, where the worker that polls the trainer
// stores them, so any server can answer for a job trained elsewhere. A
// job that has not started yet has none.
func (s *Service) RunMetrics(ctx context.Context, j db.FineTuningJob) ([]json.RawMessage, error) {
	rows, err := db.New(s.Pool).FineTuneRunMetricList(ctx, db.FineTuneRunMetricListParams{OrgID: j.OrgID, JobID: j.ID, RowLimit: maxRunMetrics})
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(rows))
	for i, r := range rows {
		out[len(rows)-1-i] = r.Record
	}
	return out, nil
}

// IRSPoint is one IRS iteration's summary from metrics.jsonl: the average
// reward of its candidates and the score weights it used and chose next.
type IRSPoint struct {
	Iter            int                `json:"iter"`
	AvgReward       *float64           `json:"avg_reward"`
	RewardBreakdown map[string]float64 `json:"reward_breakdown,omitempty"`
	Weights         map[string]float64 `json:"weights,omitempty"`
	NextWeights     map[string]float64 `json:"next_weights,omitempty"`
}

// IRSPhase is where an IRS run last said it was.
type IRSPhase struct {
	Iter     int      `json:"iter"`
	Phase    string   `json:"phase"`
	Progress *float64 `json:"progress"` // percent of the phase, when given
}

// IRSSummary reads the iteration summaries (lines with avg_reward) and
// the last phase from metrics.jsonl lines.
func IRSSummary(lines []json.RawMessage) (points []IRSPoint, last IRSPhase) {
	for _, l := range lines {
		var p IRSPoint
		if json.Unmarshal(l, &p) == nil && p.AvgReward != nil && p.Iter > 0 {
			points = append(points, p)
		}
		var ph IRSPhase
		if json.Unmarshal(l, &ph) == nil && ph.Phase != "" {
			if ph.Iter == 0 {
				ph.Iter = last.Iter // a line of the iteration under way
			}
			if ph.Progress == nil && ph.Iter == last.Iter && ph.Phase == last.Phase {
				ph.Progress = last.Progress
			}
			last = ph
		}
	}
	return points, last
}

// RewardEvalPoint is a reward model's evaluation after an epoch, from
// metrics.jsonl: pairwise ranking accuracy, with ratings MSE, MAE and
// Pearson's r, and the calibration of its preference probabilities.
type RewardEvalPoint struct {
	Step             int              `json:"step"`
	Epoch            int              `json:"epoch"`
	EvalLoss         *float64         `json:"eval_loss"`
	RankingAccuracy  *float64         `json:"ranking_accuracy"`
	MSE              *float64         `json:"eval_mse"`
	MAE              *float64         `json:"eval_mae"`
	Pearson          *float64         `json:"pearson"`
	CalibrationError *float64         `json:"calibration_error"`
	Calibration      []CalibrationBin `json:"calibration"`
}

// CalibrationBin is one bin of predicted preference probability: how many
// readings fell in it, their mean probability and the share that were the
// preferred reply (both nil when it is empty).
type CalibrationBin struct {
	Lower     float64  `json:"lower"`
	Upper     float64  `json:"upper"`
	Count     int      `json:"count"`
	Predicted *float64 `json:"predicted"`
	Observed  *float64 `json:"observed"`
}

// RewardEval is a reward run's evaluations by epoch and, with early
// stopping, the epoch whose weights it kept (0 when not reported).
type RewardEval struct {
	Points       []RewardEvalPoint
	BestEpoch    int
	BestEvalLoss *float64
}

// RewardSummary reads a reward run's evaluations (lines with
// ranking_accuracy) and the best epoch from metrics.jsonl lines.
func RewardSummary(lines []json.RawMessage) RewardEval {
	var out RewardEval
	for _, l := range lines {
		var p RewardEvalPoint
		if json.Unmarshal(l, &p) == nil && p.RankingAccuracy != nil {
			out.Points = append(out.Points, p)
		}
		var best struct {
			BestEpoch    int      `json:"best_epoch"`
			BestEvalLoss *float64 `json:"best_eval_loss"`
		}
		if json.Unmarshal(l, &best) == nil && best.BestEpoch > 0 {
			out.BestEpoch, out.BestEvalLoss = best.BestEpoch, best.BestEvalLoss
		}
	}
	return out
}

// PolicyPoint is one step of a grpo or ppo run: the mean reward of its
// samples, the sampling policy's KL from the reference, the share of
// tokens the clip held back, and the losses.
type PolicyPoint struct {
	Step            int                `json:"step"`
	Epoch           int                `json:"epoch"`
	Loss            *float64           `json:"loss"`
	Reward          *float64           `json:"reward"`
	RewardStd       *float64           `json:"reward_std"`
	KL              *float64           `json:"kl"`
	ClipFraction    *float64           `json:"clip_fraction"`
	ValueLoss       *float64           `json:"value_loss"`
	ResponseLength  *float64           `json:"response_length"`
	RewardBreakdown map[string]float64 `json:"reward_breakdown"`
}

// HeldOutCheck is one held-out reward check of a grpo or ppo run: the
// held-out score, and the mean training reward since the check before.
type HeldOutCheck struct {
	Step        int      `json:"step"`
	Score       *float64 `json:"heldout_score"`
	TrainReward *float64 `json:"train_reward"`
}

// PolicySummary reads a policy run's steps (lines with reward and kl) and
// held-out checks from metrics.jsonl lines.
func PolicySummary(lines []json.RawMessage) (steps []PolicyPoint, checks []HeldOutCheck) {
	for _, l := range lines {
		var p PolicyPoint
		if json.Unmarshal(l, &p) == nil && p.Reward != nil && p.KL != nil {
			steps = append(steps, p)
			continue
		}
		var c HeldOutCheck
		if json.Unmarshal(l, &c) == nil && c.Score != nil {
			checks = append(checks, c)
		}
	}
	return steps, checks
}

// StopReasons are the reasons a run gave for ending early (its STOPPED
// lines: early stopping, the KL bound, reward hacking), oldest first.
func StopReasons(lines []json.RawMessage) []string {
	var out []string
	for _, s := range Stops(lines) {
		out = append(out, s.Reason)
	}
	return out
}

// OptimPoint is one training step's optimiser readings from
// metrics.jsonl: the learning rate the step used and the gradient norm
// before clipping; nil where the trainer did not report one.
type OptimPoint struct {
	Step     int      `json:"step"`
	LR       *float64 `json:"lr"`
	GradNorm *float64 `json:"grad_norm"`
}

// OptimSummary reads every method's training steps (TRAINING lines with
// lr or grad_norm) from metrics.jsonl lines, in step order; a step
// reported twice (an IRS iteration's SFT step after a resume) keeps its
// last reading.
func OptimSummary(lines []json.RawMessage) []OptimPoint {
	var out []OptimPoint
	at := map[int]int{}
	for _, l := range lines {
		var p struct {
			OptimPoint
			Phase string `json:"phase"`
		}
		if json.Unmarshal(l, &p) != nil || p.Phase != "TRAINING" || p.LR == nil && p.GradNorm == nil {
			continue
		}
		if i, seen := at[p.Step]; seen {
			out[i] = p.OptimPoint
			continue
		}
		at[p.Step] = len(out)
		out = append(out, p.OptimPoint)
	}
	slices.SortStableFunc(out, func(a, b OptimPoint) int { return a.Step - b.Step })
	return out
}

// Kept is the model a run kept when its last epoch was not its best
// (save-best): the epoch and step whose weights it has, and their
// validation loss.
type Kept struct {
	Epoch    int      `json:"best_epoch"`
	Step     int      `json:"best_step"`
	EvalLoss *float64 `json:"best_eval_loss"`
}

// KeptBest reads the last best_epoch line of metrics.jsonl lines; ok is
// false when the run reported none (no validation file, or still running).
func KeptBest(lines []json.RawMessage) (k Kept, ok bool) {
	for _, l := range lines {
		var b Kept
		if json.Unmarshal(l, &b) == nil && b.Epoch > 0 {
			k, ok = b, true
		}
	}
	return k, ok
}

// Stop is one stop line of metrics.jsonl: the step (nil when not given)
// at which the run ended early, and why.
type Stop struct {
	Step   *int   `json:"step"`
	Epoch  *int   `json:"epoch"`
	Reason string `json:"reason"`
}

// Stops are a run's STOPPED lines, oldest first.
func Stops(lines []json.RawMessage) []Stop {
	var out []Stop
	for _, l := range lines {
		var s struct {
			Stop
			Phase string `json:"phase"`
		}
		if json.Unmarshal(l, &s) == nil && s.Phase == "STOPPED" && s.Reason != "" {
			out = append(out, s.Stop)
		}
	}
	return out
}
