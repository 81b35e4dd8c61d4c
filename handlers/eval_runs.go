package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/views"
)

// evaluationRuns fills the evaluation page's runs and, for admins, the
// start form (as typed when start is set, else its defaults).
func (h *Handlers) evaluationRuns(c echo.Context, m *views.EvaluationsView, start *views.StartForm) error {
	caller := CallerOf(c)
	runs, err := h.Eval.Runs(ctx(c), caller.OrgID, nil)
	if err != nil {
		return err
	}
	m.Runs = runRows(runs)
	if !m.IsAdmin {
		return nil
	}
	choices, err := h.Eval.StartChoices(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	frozen, err := h.Eval.Frozen(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	for _, f := range frozen {
		m.Choices.Frozen = append(m.Choices.Frozen, views.Option{Value: f.ID.String(), Label: f.Label})
	}
	for _, v := range choices.Versions {
		if v.Status != "archived" {
			m.Choices.Versions = append(m.Choices.Versions, views.Option{Value: v.ID.String(), Label: v.Name + " " + v.Version})
		}
	}
	for _, e := range choices.Endpoints {
		m.Choices.Endpoints = append(m.Choices.Endpoints, views.Option{Value: e.Name, Label: e.Name + " (" + e.Model + ")"})
	}
	seen := map[string]bool{}
	for _, t := range choices.Templates {
		if !seen[t.Name] {
			seen[t.Name] = true
			m.Choices.Templates = append(m.Choices.Templates, views.Option{Value: t.Name, Label: fmt.Sprintf("%s, version %d", t.Name, t.Version)})
		}
	}
	for _, f := range choices.Formulas {
		m.Choices.Formulas = append(m.Choices.Formulas, fmt.Sprintf("%s version %d: %s", f.Name, f.Version, f.Formula))
	}
	// A reward model cannot score yet: it is not offered.
	m.Choices.Scorers = slices.DeleteFunc(scorers.PresetNames(), func(n string) bool { return n == "reward_model" })
	if start != nil {
		m.Start = *start
	} else {
		m.Start = views.StartForm{Scorers: []string{"judge"}, JudgeTemplate: "default", Formula: `{"judge": 1}`}
	}
	return nil
}

func runRows(runs []eval.RunRow) []views.RunRowView {
	out := make([]views.RunRowView, 0, len(runs))
	for _, r := range runs {
		row := views.RunRowView{ID: r.ID.String(), URL: "/evaluations/runs/" + r.ID.String(), Kind: r.Kind, Status: r.Status,
			GoldenSet: r.GoldenSet, Candidate: r.Candidate, Mean: rewardText(r.MeanReward, r.CI), Started: views.When(r.CreatedAt),
			Done: r.Done, Total: r.Total, Invalid: r.Invalid}
		if r.CandidateVersionID != nil {
			row.CandidateURL = "/models/versions/" + r.CandidateVersionID.String()
		}
		out = append(out, row)
	}
	return out
}

// rewardText writes a mean reward with its interval: "0.812 (0.770 to 0.851)".
func rewardText(mean *float64, ci []float64) string {
	if mean == nil {
		return "None yet"
	}
	s := strconv.FormatFloat(*mean, 'f', 3, 64)
	if len(ci) == 2 {
		s += fmt.Sprintf(" (95%% interval %.3f to %.3f)", ci[0], ci[1])
	}
	return s
}

func reward3(x *float64) string {
	if x == nil {
		return "None"
	}
	return strconv.FormatFloat(*x, 'f', 3, 64)
}

// EvaluationRunStart starts a run from the evaluation page's form.
func (h *Handlers) EvaluationRunStart(c echo.Context) error {
	params, err := c.FormParams()
	if err != nil {
		return err
	}
	form := views.StartForm{GoldenSetVersionID: params.Get("golden_set_version_id"), CandidateVersionID: params.Get("candidate_version_id"),
		CandidateEndpoint: params.Get("candidate_endpoint"), JudgeEndpoint: params.Get("judge_endpoint"),
		JudgeTemplate: params.Get("judge_template"), Formula: strings.TrimSpace(params.Get("reward_formula")), Scorers: params["scorers"]}
	bad := map[string]string{}
	cfg := eval.Config{Candidate: eval.Candidate{Endpoint: form.CandidateEndpoint}}
	if cfg.GoldenSetVersionID, err = uuid.Parse(form.GoldenSetVersionID); err != nil {
		bad["golden_set_version_id"] = "choose a frozen dataset version"
	}
	if form.CandidateVersionID != "" {
		id, err := uuid.Parse(form.CandidateVersionID)
		if err != nil {
			bad["candidate.model_version_id"] = "choose a model version"
		}
		cfg.Candidate.ModelVersionID = &id
	}
	for _, name := range form.Scorers {
		cfg.Scorers = append(cfg.Scorers, scorers.Config{Preset: name})
	}
	if form.JudgeEndpoint != "" {
		cfg.Judge = &eval.JudgeConfig{Endpoint: form.JudgeEndpoint, Template: form.JudgeTemplate}
	}
	if form.Formula != "" {
		if !json.Valid([]byte(form.Formula)) {
			bad["reward_formula"] = `must be a JSON object of weights, such as {"judge": 1}`
		}
		cfg.RewardFormula = json.RawMessage(form.Formula)
	}
	if len(bad) == 0 {
		run, err := h.Eval.Start(ctx(c), actor(c), CallerOf(c).OrgID, cfg)
		var invalid *errs.Invalid
		switch {
		case errors.As(err, &invalid):
			bad = formErrors(invalid)
		case err != nil:
			return err
		default:
			return redirect(c, "/evaluations/runs/"+run.ID.String())
		}
	}
	return h.renderEvaluations(c, http.StatusUnprocessableEntity, views.GoldenSetForm{SplitTags: "gold_set, red_team"}, bad, nil, &form)
}

// formErrors maps a run's field errors onto the form's inputs: a weight's
// error (reward_formula.judge) shows under the formula, a scorer's under
// the scorers.
func formErrors(invalid *errs.Invalid) map[string]string {
	out := map[string]string{}
	for _, e := range invalid.Errors {
		field := e.Field
		msg := e.Message
		switch {
		case strings.HasPrefix(field, "reward_formula."):
			msg = strings.TrimPrefix(field, "reward_formula.") + ": " + msg
			field = "reward_formula"
		case strings.HasPrefix(field, "scorers"):
			field = "scorers"
		}
		if _, ok := out[field]; !ok {
			out[field] = msg
		}
	}
	return out
}

// EvaluationRun is one run's page.
func (h *Handlers) EvaluationRun(c echo.Context) error {
	m, err := h.runView(c, true)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.RunPage(h.page(c, "Evaluation", "models"), m))
}

// EvaluationRunLive is the run's polled progress. When the run has ended
// the page is reloaded whole, to show its items and comparison.
func (h *Handlers) EvaluationRunLive(c echo.Context) error {
	m, err := h.runView(c, false)
	if err != nil {
		return err
	}
	if !m.Running {
		c.Response().Header().Set("HX-Refresh", "true")
	}
	return render(c, http.StatusOK, views.RunLive(m))
}

func (h *Handlers) runView(c echo.Context, whole bool) (views.RunView, error) {
	id, err := pathID(c)
	if err != nil {
		return views.RunView{}, err
	}
	org := CallerOf(c).OrgID
	r, err := h.Eval.GetRun(ctx(c), org, id)
	if err != nil {
		return views.RunView{}, err
	}
	row, err := h.Eval.RunRow(ctx(c), org, id)
	if err != nil {
		return views.RunView{}, err
	}
	s := r.Summary
	m := views.RunView{ID: r.ID.String(), Kind: r.Kind, Status: r.Status, GoldenSet: row.GoldenSet, Candidate: row.Candidate,
		Mean: rewardText(s.MeanReward, s.CI), Formula: s.Formula, JudgeCost: fmt.Sprintf("$%.4f", s.JudgeCostUSD),
		AnswerCost: fmt.Sprintf("$%.4f", s.AnswerCostUSD), PausedReason: s.PausedReason, Error: s.Error,
		Started: views.When(row.CreatedAt), Finished: views.WhenPtr(s.FinishedAt),
		Done: r.Progress.Done, Total: r.Progress.Total, Invalid: s.Invalid, JudgeCalls: s.JudgeCalls,
		Running: r.Status == "queued" || r.Status == "running", CanResume: r.Status == "paused" && CallerOf(c).Role.AtLeast(auth.Admin)}
	if row.CreatedBy != "" {
		m.Started += " by " + row.CreatedBy
	}
	if row.CandidateVersionID != nil {
		m.CandidateURL = "/models/versions/" + row.CandidateVersionID.String()
	}
	if !whole {
		return m, nil
	}
	baseline := map[string]string{}
	cmp, err := h.Eval.Compare(ctx(c), org, id)
	switch {
	case errors.Is(err, eval.ErrNoBaseline):
	case err != nil:
		return views.RunView{}, err
	default:
		cv := &views.ComparisonView{BaselineURL: "/evaluations/runs/" + cmp.BaselineRunID.String(), CandidateMean: reward3(cmp.CandidateMean),
			BaselineMean: reward3(cmp.BaselineMean), Margin: ftoa(cmp.Margin), Wins: cmp.Paired.Wins, Ties: cmp.Paired.Ties, Losses: cmp.Paired.Losses}
		for _, d := range cmp.Regressions {
			cv.Regressions = append(cv.Regressions, diffRow(d))
		}
		for _, d := range cmp.NewFlags {
			cv.NewFlags = append(cv.NewFlags, diffRow(d))
		}
		for _, sp := range cmp.Splits {
			baseline[sp.Split] = reward3(sp.BaselineMean)
		}
		m.Comparison = cv
	}
	for _, sp := range r.Splits {
		m.Splits = append(m.Splits, views.SplitRowView{Split: sp.Split, Items: sp.Items, Mean: reward3(sp.CandidateMean), Baseline: baseline[sp.Split]})
	}
	for _, it := range r.Items {
		iv := views.RunItemView{Split: it.Split, Query: it.Query, Answer: it.Answer, Reference: it.Reference, Reward: reward3(it.Reward),
			RewardExplanation: it.RewardExplanation, Critique: it.Critique, Invalid: it.Invalid, Safety: it.Safety}
		for _, name := range slices.Sorted(maps.Keys(it.Scores)) {
			sc := it.Scores[name]
			iv.Scores = append(iv.Scores, views.ScoreView{Name: name, Value: strconv.FormatFloat(sc.Value, 'f', 3, 64),
				Explanation: sc.Explanation, Invalid: sc.Invalid})
		}
		m.Items = append(m.Items, iv)
	}
	return m, nil
}

func diffRow(d eval.ItemDiff) views.DiffRowView {
	return views.DiffRowView{Split: d.Split, Query: d.Query, CandidateAnswer: d.CandidateAnswer, BaselineAnswer: d.BaselineAnswer,
		CandidateReward: reward3(d.CandidateReward), BaselineReward: reward3(d.BaselineReward)}
}

// EvaluationRunResume queues a paused run again.
func (h *Handlers) EvaluationRunResume(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := h.Eval.Resume(ctx(c), actor(c), CallerOf(c).OrgID, id); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The evaluation goes on from where it stopped.")
	return redirect(c, "/evaluations/runs/"+id.String())
}
