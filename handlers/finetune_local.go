package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/views"
)

// localInput is one local trainer setting on the launch form: its field
// name (as errors name it), and where its parsed value goes.
type localInput struct {
	views.FineTuneLocalInput
	set func(s *local.Settings, v string) error
}

func wholeNumber(into *int) func(*local.Settings, string) error {
	return func(_ *local.Settings, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("must be a whole number, or empty for the default")
		}
		*into = n
		return nil
	}
}

func decimal(into *float64) func(*local.Settings, string) error {
	return func(_ *local.Settings, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("must be a number, or empty for the default")
		}
		*into = f
		return nil
	}
}

// localInputs lists the local settings the form offers, each writing
// into s. Empty inputs keep the trainer's defaults, which the
// placeholders show (IRS's are those of Curate's IRS design).
func localInputs(s *local.Settings, weights map[string]float64) []localInput {
	d, p := local.DefaultIRS(), local.DefaultPolicy()
	g := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	in := func(name, label, placeholder, hint string, set func(*local.Settings, string) error) localInput {
		return localInput{views.FineTuneLocalInput{Name: name, Label: label, Placeholder: placeholder, Hint: hint,
			IRS: strings.HasPrefix(name, "local.irs."), Policy: strings.HasPrefix(name, "local.policy.")}, set}
	}
	weight := func(k string) func(*local.Settings, string) error {
		return func(_ *local.Settings, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("must be a number, or empty for the default")
			}
			weights[k] = f
			return nil
		}
	}
	return []localInput{
		in("local.lora_r", "LoRA rank", "8", "1–256", wholeNumber(&s.LoRAR)),
		in("local.lora_alpha", "LoRA alpha", "16", "1–1024", wholeNumber(&s.LoRAAlpha)),
		in("local.lora_dropout", "LoRA dropout", "0.05", "0 up to (not including) 1", func(s *local.Settings, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("must be a number, or empty for the default")
			}
			s.LoRADropout = &f
			return nil
		}),
		in("local.target_modules", "Target modules", "auto", "comma-separated module names, or all-linear", func(s *local.Settings, v string) error {
			for _, m := range strings.Split(v, ",") {
				s.TargetModules = append(s.TargetModules, strings.TrimSpace(m))
			}
			return nil
		}),
		in("local.learning_rate", "Learning rate", "by method", "above 0, below 1 (sft 2e-4, dpo 5e-5, reward 2e-5, grpo and ppo 1e-5)", decimal(&s.LearningRate)),
		in("local.max_length", "Max length", "1024", "16–32768 tokens", wholeNumber(&s.MaxLength)),
		in("local.irs.n_iterations", "IRS iterations", strconv.Itoa(d.NIterations), "1–50", wholeNumber(&s.IRS.NIterations)),
		in("local.irs.n_candidates", "IRS candidates per prompt", strconv.Itoa(d.NCandidates), "2–16", wholeNumber(&s.IRS.NCandidates)),
		in("local.irs.batch_size", "IRS batch size", strconv.Itoa(d.BatchSize), "1–1024", wholeNumber(&s.IRS.BatchSize)),
		in("local.irs.learning_rate", "IRS learning rate", g(d.LearningRate), "above 0, below 1", decimal(&s.IRS.LearningRate)),
		in("local.irs.max_new_tokens", "IRS max new tokens", strconv.Itoa(d.MaxNewTokens), "1–8192", wholeNumber(&s.IRS.MaxNewTokens)),
		in("local.irs.n_questions", "IRS questions", "all", "prompts per iteration", wholeNumber(&s.IRS.NQuestions)),
		in("local.irs.dw_config.history_window", "DW-GRPO history window", strconv.Itoa(d.DW.HistoryWindow), "2–1000 iterations", wholeNumber(&s.IRS.DW.HistoryWindow)),
		in("local.irs.dw_config.temperature", "DW-GRPO temperature", g(d.DW.Temperature), "above 0, at most 1000", decimal(&s.IRS.DW.Temperature)),
		in("local.irs.dw_config.initial_weights.rel", "Initial weight: relevance", g(d.DW.InitialWeights["rel"]), "−100 to 100", weight("rel")),
		in("local.irs.dw_config.initial_weights.faith", "Initial weight: faithfulness", g(d.DW.InitialWeights["faith"]), "−100 to 100", weight("faith")),
		in("local.irs.dw_config.initial_weights.conc", "Initial weight: concision", g(d.DW.InitialWeights["conc"]), "−100 to 100", weight("conc")),
		in("local.policy.group_size", "Answers per prompt", strconv.Itoa(p.GroupSize), "GRPO 2–64, PPO 1–64", wholeNumber(&s.Policy.GroupSize)),
		in("local.policy.max_new_tokens", "Max new tokens", strconv.Itoa(p.MaxNewTokens), "1–8192", wholeNumber(&s.Policy.MaxNewTokens)),
		in("local.policy.kl_coef", "KL penalty", g(*p.KLCoef), "0–10; 0 turns it off", func(s *local.Settings, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("must be a number, or empty for the default")
			}
			s.Policy.KLCoef = &f
			return nil
		}),
		in("local.policy.kl_max", "KL bound", g(p.KLMax), "above 0, at most 100: the run stops past it", decimal(&s.Policy.KLMax)),
		in("local.policy.clip_epsilon", "Clip range", g(p.ClipEpsilon), "above 0, below 1", decimal(&s.Policy.ClipEpsilon)),
		in("local.policy.reward_model", "Reward model", "none: the reward formula", "a trained reward model's name in the models directory", func(s *local.Settings, v string) error {
			s.Policy.RewardModel = strings.TrimSpace(v)
			return nil
		}),
		in("local.policy.holdout_every", "Held-out check every", strconv.Itoa(p.HoldoutEvery), "steps, 1 or more", wholeNumber(&s.Policy.HoldoutEvery)),
	}
}

// localFieldNames are the names of the local inputs, for re-rendering
// and messages.
func localFieldNames() []string {
	var out []string
	for _, in := range localInputs(&local.Settings{}, map[string]float64{}) {
		out = append(out, in.Name)
	}
	return out
}

// parseLocalForm reads the local settings from the form values; nil when
// every input is empty. A partly given set of initial weights is filled
// from the defaults, so naming one weight does not drop the others.
func parseLocalForm(values map[string]string, bad *errs.Invalid) *local.Settings {
	var s local.Settings
	weights := map[string]float64{}
	given := false
	for _, in := range localInputs(&s, weights) {
		v := values[in.Name]
		if v == "" {
			continue
		}
		given = true
		if err := in.set(&s, v); err != nil {
			bad.Add(in.Name, "%v", err)
		}
	}
	if !given {
		return nil
	}
	if len(weights) > 0 {
		s.IRS.DW.InitialWeights = maps.Clone(local.DefaultIRS().DW.InitialWeights)
		maps.Copy(s.IRS.DW.InitialWeights, weights)
	}
	return &s
}

// localDevice describes, for the launch form, where local jobs would
// train: the live workers of the GPU queue, not this server's machine.
func (h *Handlers) localDevice(ctx context.Context) string {
	if _, ok := h.FineTune.Providers[local.Name]; !ok {
		return ""
	}
	ws, err := h.FineTune.GPUWorkers(ctx)
	if err != nil {
		h.Log.Warn("reading the GPU workers for the launch form", "err", err)
		return "unknown: the workers could not be read (the server's log has the detail)"
	}
	return workersLine(ws)
}

// settingsRows lists a local job's settings as "name: value" rows, nested
// ones with dotted names ("irs.n_iterations").
func settingsRows(raw json.RawMessage) []views.Option {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var out []views.Option
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if sub, ok := m[k].(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			b, _ := json.Marshal(m[k])
			out = append(out, views.Option{Label: prefix + k, Value: string(b)})
		}
	}
	walk("", m)
	return out
}

// scoreColors colour the IRS weight lines, one per score.
var scoreColors = map[string]string{"rel": "#1f77b4", "faith": "#ff7f0e", "conc": "#2ca02c", "rm": "#9467bd"}

// IRS chart geometry: the view box is 600 × 200 with a margin for labels.
const (
	chartW, chartH = 600.0, 200.0
	chartPad       = 16.0
)

// irsChart draws the IRS iterations: x is the iteration (1 at the left,
// the last at the right), y the average reward from zero to the largest,
// and in the second chart each score's weight from zero to the largest.
func irsChart(points []finetune.IRSPoint) views.FineTuneIRSChart {
	c := views.FineTuneIRSChart{Iters: len(points)}
	if len(points) == 0 {
		return c
	}
	maxIter, maxReward, maxWeight := 1, 0.0, 0.0
	scores := map[string]bool{}
	for _, p := range points {
		maxIter = max(maxIter, p.Iter)
		maxReward = math.Max(maxReward, math.Abs(*p.AvgReward))
		for k, w := range p.Weights {
			scores[k] = true
			maxWeight = math.Max(maxWeight, math.Abs(w))
		}
	}
	x := func(iter int) float64 {
		if maxIter == 1 {
			return chartPad
		}
		return chartPad + float64(iter-1)/float64(maxIter-1)*(chartW-2*chartPad)
	}
	y := func(v, top float64) float64 {
		if top <= 0 {
			return chartH - chartPad
		}
		return chartH - chartPad - v/top*(chartH-2*chartPad)
	}
	pt := func(x, y float64) string {
		return strconv.FormatFloat(x, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64)
	}
	var reward []string
	for _, p := range points {
		reward = append(reward, pt(x(p.Iter), y(*p.AvgReward, maxReward)))
		c.Rows = append(c.Rows, views.FineTuneIRSRow{Iter: p.Iter, AvgReward: num(*p.AvgReward, true),
			Breakdown: weightsText(p.RewardBreakdown), Weights: weightsText(p.Weights), Next: weightsText(p.NextWeights)})
	}
	c.Reward, c.MaxReward = strings.Join(reward, " "), num(maxReward, true)
	for _, k := range slices.Sorted(maps.Keys(scores)) {
		var line []string
		for _, p := range points {
			if w, ok := p.Weights[k]; ok {
				line = append(line, pt(x(p.Iter), y(w, maxWeight)))
			}
		}
		color := scoreColors[k]
		if color == "" {
			color = "#7f7f7f"
		}
		c.Weights = append(c.Weights, views.FineTuneSeries{Name: k, Points: strings.Join(line, " "), Color: color})
	}
	c.MaxWeight = num(maxWeight, true)
	return c
}

// weightsText writes score values as "conc 0.5 · faith 1 · rel 1".
func weightsText(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+num(m[k], true))
	}
	return strings.Join(parts, " · ")
}
