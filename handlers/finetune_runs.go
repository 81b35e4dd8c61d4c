package handlers

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/rlaif"
	"github.com/curate/curate/views"
)

// rewardEvalView is a reward run's evaluation for the job page: a row per
// epoch, and the figures and calibration of the epoch whose weights the
// model kept (the last evaluated when early stopping kept none).
func rewardEvalView(r finetune.RewardEval) views.FineTuneRewardEval {
	v := views.FineTuneRewardEval{KeptEpoch: r.BestEpoch}
	if len(r.Points) == 0 {
		return v
	}
	kept := r.Points[len(r.Points)-1]
	for _, p := range r.Points {
		if r.BestEpoch > 0 && p.Epoch == r.BestEpoch {
			kept = p
		}
		v.Rows = append(v.Rows, views.FineTuneRewardRow{Epoch: p.Epoch, Step: p.Step, EvalLoss: numPtr(p.EvalLoss),
			Accuracy: sharePercent(p.RankingAccuracy), MSE: numPtr(p.MSE), MAE: numPtr(p.MAE), Pearson: numPtr(p.Pearson),
			CalibrationError: numPtr(p.CalibrationError), Kept: r.BestEpoch > 0 && p.Epoch == r.BestEpoch})
	}
	if r.BestEpoch > 0 {
		v.Kept = fmt.Sprintf("The model keeps the weights of epoch %d, whose validation loss (%s) was the lowest.", r.BestEpoch, numPtr(r.BestEvalLoss))
	}
	v.Accuracy, v.MSE, v.MAE, v.Pearson = sharePercent(kept.RankingAccuracy), numPtr(kept.MSE), numPtr(kept.MAE), numPtr(kept.Pearson)
	v.CalibrationError = numPtr(kept.CalibrationError)
	for _, b := range kept.Calibration {
		v.Calibration.Bin = append(v.Calibration.Bin, (b.Lower+b.Upper)/2)
		v.Calibration.Observed = append(v.Calibration.Observed, b.Observed)
		v.Calibration.Predicted = append(v.Calibration.Predicted, b.Predicted)
		v.Bins = append(v.Bins, views.FineTuneCalibrationRow{Range: fmt.Sprintf("%.1f–%.1f", b.Lower, b.Upper), Count: b.Count,
			Predicted: numPtr(b.Predicted), Observed: sharePercent(b.Observed)})
	}
	return v
}

// policyView is a GRPO or PPO run for the job page: its steps and
// held-out checks in step order, the check before training at step 0.
func policyView(method string, steps []finetune.PolicyPoint, checks []finetune.HeldOutCheck) views.FineTunePolicy {
	v := views.FineTunePolicy{Method: method, Steps: len(steps), Reward: "—", KL: "—", ClipFraction: "—", HeldOut: "—"}
	if n := len(steps); n > 0 {
		last := steps[n-1]
		v.Reward, v.KL, v.ClipFraction = numPtr(last.Reward), numPtr(last.KL), sharePercent(last.ClipFraction)
	}
	if n := len(checks); n > 0 {
		v.HeldOut = numPtr(checks[n-1].Score)
	}
	heldOut := map[int]*float64{}
	for _, c := range checks {
		heldOut[c.Step] = c.Score
	}
	at := map[int]int{} // step -> index in the series
	add := func(step int) int {
		if i, ok := at[step]; ok {
			return i
		}
		at[step] = len(v.Series.Step)
		s := &v.Series
		s.Step = append(s.Step, step)
		s.Reward, s.HeldOut, s.KL, s.Clip = append(s.Reward, nil), append(s.HeldOut, nil), append(s.KL, nil), append(s.Clip, nil)
		v.Rows = append(v.Rows, views.FineTunePolicyRow{Step: step, Reward: "—", KL: "—", ClipFraction: "—", Loss: "—", ValueLoss: "—", HeldOut: "—"})
		return at[step]
	}
	// Checks and steps each come in step order; a check at step n follows
	// step n's update, and the one before training is step 0.
	ci := 0
	for _, p := range steps {
		for ; ci < len(checks) && checks[ci].Step < p.Step; ci++ {
			add(checks[ci].Step)
		}
		i := add(p.Step)
		s := &v.Series
		s.Reward[i], s.KL[i], s.Clip[i] = p.Reward, p.KL, p.ClipFraction
		r := &v.Rows[i]
		r.Reward, r.KL, r.ClipFraction, r.Loss, r.ValueLoss = numPtr(p.Reward), numPtr(p.KL), sharePercent(p.ClipFraction), numPtr(p.Loss), numPtr(p.ValueLoss)
		if p.ValueLoss != nil {
			v.ValueLoss = true
		}
	}
	for ; ci < len(checks); ci++ {
		add(checks[ci].Step)
	}
	for step, score := range heldOut {
		i := at[step]
		v.Series.HeldOut[i] = score
		v.Rows[i].HeldOut = numPtr(score)
	}
	return v
}

// sharePercent writes a share as a percentage with one decimal ("72.5%"), or "—".
func sharePercent(f *float64) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", *f*100)
}

// withOptim puts each step's learning rate and gradient norm beside its
// loss, in the training charts' data and the metrics table; a step that
// reported only them joins in step order.
func withOptim(v *views.FineTuneLiveView, points []finetune.OptimPoint) {
	if len(points) == 0 {
		return
	}
	type row struct {
		train, valid, lr, gradNorm *float64
		table                      *views.FineTuneMetricPoint
	}
	byStep := map[int]*row{}
	get := func(step int) *row {
		r := byStep[step]
		if r == nil {
			r = &row{}
			byStep[step] = r
		}
		return r
	}
	for i, step := range v.Loss.Step {
		r := get(step)
		r.train, r.valid = v.Loss.Train[i], v.Loss.Valid[i]
	}
	for i := range v.Metrics {
		get(v.Metrics[i].Step).table = &v.Metrics[i]
	}
	for _, p := range points {
		r := get(p.Step)
		r.lr, r.gradNorm = p.LR, p.GradNorm
		v.HasLR = v.HasLR || p.LR != nil
		v.HasGradNorm = v.HasGradNorm || p.GradNorm != nil
	}
	steps := slices.Sorted(maps.Keys(byStep))
	loss := views.FineTuneLoss{Marks: v.Loss.Marks}
	var table []views.FineTuneMetricPoint
	for _, step := range steps {
		r := byStep[step]
		loss.Step = append(loss.Step, step)
		loss.Train, loss.Valid = append(loss.Train, r.train), append(loss.Valid, r.valid)
		loss.LR, loss.GradNorm = append(loss.LR, r.lr), append(loss.GradNorm, r.gradNorm)
		t := views.FineTuneMetricPoint{Step: step, TrainLoss: "—", TrainAcc: "—", ValidLoss: "—", ValidAcc: "—"}
		if r.table != nil {
			t = *r.table
		}
		t.LR, t.GradNorm = lrText(r.lr), numPtr(r.gradNorm)
		table = append(table, t)
	}
	v.Loss, v.Metrics = loss, table
}

// lrText is a learning rate as the table shows it: 2e-05, 0.0002.
func lrText(f *float64) string {
	if f == nil {
		return "—"
	}
	return strconv.FormatFloat(*f, 'g', 3, 64)
}

// withMarks marks on the loss chart, and says above it, the steps where a
// run stopped early and whose weights save-best kept.
func withMarks(v *views.FineTuneLiveView, stops []finetune.Stop, kept finetune.Kept, hasKept bool) {
	for _, s := range stops {
		v.StoppedEarly = append(v.StoppedEarly, s.Reason)
		if s.Step != nil {
			v.Loss.Marks = append(v.Loss.Marks, views.FineTuneMark{Step: *s.Step, Label: "stopped early: " + s.Reason})
		}
	}
	if !hasKept {
		return
	}
	v.Kept = fmt.Sprintf("the weights of epoch %d (step %d), whose validation loss %s was the lowest, rather than those of the last epoch.",
		kept.Epoch, kept.Step, numPtr(kept.EvalLoss))
	v.Loss.Marks = append(v.Loss.Marks, views.FineTuneMark{Step: kept.Step, Label: fmt.Sprintf("the kept model (epoch %d, validation loss %s)",
		kept.Epoch, numPtr(kept.EvalLoss))})
}

// rlaifView is a run's RLAIF samples for the job page: the mean reward and
// each component's mean by step, and the teacher's spend.
func rlaifView(steps []rlaif.Step, spend rlaif.Spend) views.FineTuneRLAIF {
	v := views.FineTuneRLAIF{Samples: spend.Samples, Steps: len(steps), Conflicts: spend.Conflicts, RedTeam: spend.RedTeam,
		TeacherCalls: spend.TeacherCalls, TeacherCost: spend.TeacherCost.String()}
	names := map[string]bool{}
	for _, s := range steps {
		for n := range s.Components {
			names[n] = true
		}
	}
	v.Components = slices.Sorted(maps.Keys(names))
	for _, n := range v.Components {
		v.Series.Components = append(v.Series.Components, views.FineTuneRLAIFComponent{Name: n})
	}
	for _, s := range steps {
		v.Series.Step = append(v.Series.Step, s.Step)
		v.Series.Reward = append(v.Series.Reward, s.MeanReward)
		row := views.FineTuneRLAIFRow{Step: s.Step, Samples: s.Samples, Conflicts: s.Conflicts, Reward: numPtr(s.MeanReward)}
		for i, n := range v.Components {
			var val *float64
			if x, ok := s.Components[n]; ok {
				val = &x
			}
			v.Series.Components[i].Values = append(v.Series.Components[i].Values, val)
			row.Components = append(row.Components, numPtr(val))
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}
