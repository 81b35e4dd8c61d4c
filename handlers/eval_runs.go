package handlers

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/reward"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/views"
)

// evaluationRuns fills the evaluation page's runs and, for admins, the
// start form: as typed when start is set, else its defaults with the
// version named by ?candidate_version_id= chosen.
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
	versions := map[string]models.Version{}
	for _, v := range choices.Versions {
		if v.Status != "archived" && v.Kind != models.KindReward { // a reward model writes no answers
			versions[v.ID.String()] = v
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
		if f.Name == reward.DefaultName && m.Choices.DefaultFormula == "" {
			m.Choices.DefaultFormula = f.Formula // the newest: listed first
		}
	}
	m.Choices.Scorers = scorerChoices()
	if start != nil {
		m.Start = *start
	} else {
		judgeAlone := reward.Formula{Terms: []reward.Term{{Scorer: "judge", Weight: 1}}}
		m.Start = views.StartForm{Scorers: []string{"judge"}, JudgeTemplate: "default", Formula: []views.FormulaRow{{Scorer: "judge", Weight: "1"}},
			FormulaText: judgeAlone.String()}
		if id := c.QueryParam("candidate_version_id"); versions[id].ID != uuid.Nil {
			m.Start.CandidateVersionID = id
		}
		gate, gated, err := h.Eval.GetGate(ctx(c), caller.OrgID)
		if err != nil {
			return err
		}
		m.Start.GoldenSetVersionID = defaultGoldenSet(c.QueryParam("golden_set_version_id"), gate, gated, m.Choices.Frozen)
		m.Start.JudgeEndpoint = defaultJudge(runs, m.Start.GoldenSetVersionID, choices.Endpoints)
	}
	if len(m.Start.Formula) < maxFormulaRows {
		m.Start.Formula = append(m.Start.Formula, make([]views.FormulaRow, min(blankFormulaRows, maxFormulaRows-len(m.Start.Formula)))...)
	}
	if v, ok := versions[m.Start.CandidateVersionID]; ok {
		if m.Reach, err = h.candidateReach(c, v); err != nil {
			return err
		}
	}
	return nil
}

// defaultGoldenSet is the golden set the start form opens on: the one the
// address names (a version's page names the gate's), else the gate's, so
// that accepting the defaults gives an evaluation the gate can read; ""
// leaves the list's first.
func defaultGoldenSet(asked string, gate eval.Gate, gated bool, frozen []views.Option) string {
	if asked != "" && slices.ContainsFunc(frozen, func(o views.Option) bool { return o.Value == asked }) {
		return asked
	}
	if gated {
		return gate.GoldenSetVersionID.String()
	}
	return ""
}

// defaultJudge is the judge the start form opens with, for its ticked
// Judge scorer: the one the newest run on the golden set used, where that
// endpoint is still there, else the organisation's only endpoint; ""
// where neither names one.
func defaultJudge(runs []eval.RunRow, goldenSet string, registered []endpoints.Endpoint) string {
	exists := func(name string) bool {
		return slices.ContainsFunc(registered, func(e endpoints.Endpoint) bool { return e.Name == name })
	}
	for _, r := range runs { // newest first
		if r.Judge != "" && (goldenSet == "" || r.GoldenSetVersionID.String() == goldenSet) && exists(r.Judge) {
			return r.Judge
		}
	}
	if len(registered) == 1 {
		return registered[0].Name
	}
	return ""
}

// scorerChoices are the scorers the form offers, each with what it
// measures. A reward model is named with its version, through the API.
func scorerChoices() []views.ScorerChoice {
	var out []views.ScorerChoice
	for _, name := range scorers.PresetNames() {
		a := scorers.Describe(name)
		out = append(out, views.ScorerChoice{Name: name, Label: a.Label, Measures: a.Measures})
	}
	return out
}

// candidateReach says whether the chosen version can answer, and where it
// could be deployed so that it can.
func (h *Handlers) candidateReach(c echo.Context, v models.Version) (*views.ReachView, error) {
	r, err := h.Models.ReachOf(ctx(c), CallerOf(c).OrgID, v.ID)
	if err != nil {
		return nil, err
	}
	out := &views.ReachView{VersionID: v.ID.String(), Label: v.Name + " " + v.Version, Kind: v.Kind, Served: r.Served, Failed: r.Failed}
	if d := r.Deploying; d != nil {
		out.Deploying = fmt.Sprintf("under %q on %s", d.Alias, d.Target)
	}
	for _, t := range r.Targets {
		out.Targets = append(out.Targets, views.Option{Value: t.Name, Label: t.Name + " (" + targetKind(t.Kind) + ")"})
	}
	return out, nil
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

// The reward formula's editor: at most as many rows as a formula has
// terms, and two blank rows to fill below those typed.
const (
	maxFormulaRows   = reward.MaxTerms
	blankFormulaRows = 2
)

// EvaluationRunStart starts a run from the evaluation page's form. The
// form's "Add a scorer" button, pressed without a script, shows the form
// again with one more row in the formula.
func (h *Handlers) EvaluationRunStart(c echo.Context) error {
	params, err := c.FormParams()
	if err != nil {
		return err
	}
	form := views.StartForm{GoldenSetVersionID: params.Get("golden_set_version_id"), CandidateVersionID: params.Get("candidate_version_id"),
		CandidateEndpoint: params.Get("candidate_endpoint"), JudgeEndpoint: params.Get("judge_endpoint"),
		JudgeTemplate: params.Get("judge_template"), EmbeddingsEndpoint: params.Get("judge_embeddings_endpoint"), Scorers: params["scorers"]}
	bad := map[string]string{}
	rows, terms, blanks, problem := formulaRows(params["formula_scorer"], params["formula_weight"])
	form.Formula, form.FormulaText = rows, reward.Formula{Terms: terms}.String()
	if len(terms) == 0 {
		form.FormulaText = ""
	}
	if problem != "" {
		bad["reward_formula"] = problem
	}
	if params.Get("formula_add") != "" {
		// Blank rows the form had, and one more (the page pads two).
		form.Formula = append(form.Formula, make([]views.FormulaRow, max(blanks+1-blankFormulaRows, 0))...)
		return h.renderEvaluations(c, http.StatusOK, views.GoldenSetForm{SplitTags: "gold_set, red_team"}, nil, nil, &form)
	}
	cfg := eval.Config{Candidate: eval.Candidate{Endpoint: form.CandidateEndpoint}}
	if cfg.GoldenSetVersionID, err = uuid.Parse(form.GoldenSetVersionID); err != nil {
		bad["golden_set_version_id"] = "Choose a frozen dataset version."
	}
	if form.CandidateVersionID != "" {
		id, err := uuid.Parse(form.CandidateVersionID)
		if err != nil {
			bad["candidate.model_version_id"] = "Choose a model version."
		}
		cfg.Candidate.ModelVersionID = &id
	}
	if (form.CandidateVersionID == "") == (form.CandidateEndpoint == "") {
		bad["candidate"] = "Choose a model version or an endpoint to answer, one of the two."
	}
	// A weighted scorer is scored: the ticked ones, then those the rows add.
	for _, name := range form.Scorers {
		cfg.Scorers = append(cfg.Scorers, scorers.Config{Preset: name})
	}
	for _, t := range terms {
		if !slices.Contains(form.Scorers, t.Scorer) && !slices.ContainsFunc(cfg.Scorers, func(c scorers.Config) bool { return c.Preset == t.Scorer }) {
			cfg.Scorers = append(cfg.Scorers, scorers.Config{Preset: t.Scorer})
		}
	}
	if form.JudgeEndpoint != "" || form.EmbeddingsEndpoint != "" {
		cfg.Judge = &eval.JudgeConfig{Endpoint: form.JudgeEndpoint, Template: form.JudgeTemplate, Embeddings: form.EmbeddingsEndpoint}
	}
	if len(terms) > 0 {
		if cfg.RewardFormula, err = json.Marshal(reward.Formula{Terms: terms}); err != nil {
			return err
		}
	}
	if len(bad) == 0 && !slices.ContainsFunc(form.Formula, func(r views.FormulaRow) bool { return r.Error != "" }) {
		run, err := h.Eval.Start(ctx(c), actor(c), CallerOf(c).OrgID, cfg)
		var invalid *errs.Invalid
		switch {
		case errors.As(err, &invalid):
			bad = formErrors(invalid, form.Formula)
		case err != nil:
			return err
		default:
			return redirect(c, "/evaluations/runs/"+run.ID.String())
		}
	}
	return h.renderEvaluations(c, http.StatusUnprocessableEntity, views.GoldenSetForm{SplitTags: "gold_set, red_team"}, bad, nil, &form)
}

// formulaRows reads the formula editor's rows: each row typed, with its
// problem beside it, the terms of those that are whole, and how many rows
// were left blank; problem is set when the rows are more than a formula
// may hold.
func formulaRows(names, weights []string) (rows []views.FormulaRow, terms []reward.Term, blanks int, problem string) {
	n := max(len(names), len(weights))
	if n > maxFormulaRows+blankFormulaRows+1 {
		return nil, nil, 0, fmt.Sprintf("The formula has %d rows; it holds at most %d scorers.", n, maxFormulaRows)
	}
	for i := range n {
		var row views.FormulaRow
		if i < len(names) {
			row.Scorer = strings.TrimSpace(names[i])
		}
		if i < len(weights) {
			row.Weight = strings.TrimSpace(weights[i])
		}
		if row.Scorer == "" && row.Weight == "" {
			blanks++
			continue
		}
		w, err := strconv.ParseFloat(row.Weight, 64)
		switch {
		case row.Scorer == "":
			row.Error = "Choose the scorer this weight is for."
		case row.Weight == "":
			row.Error = "Give this scorer a weight, such as 0.5, or -0.15 to lower the reward."
		case err != nil || math.IsNaN(w) || math.IsInf(w, 0):
			row.Error = "The weight must be a number, such as 0.5, or -0.15 to lower the reward."
		default:
			terms = append(terms, reward.Term{Scorer: row.Scorer, Weight: w})
		}
		rows = append(rows, row)
	}
	return rows, terms, blanks, ""
}

// formErrors maps a run's field errors onto the form, as sentences: a
// weight's error (reward_formula.judge) beside the formula's row for that
// scorer, a scorer's under the scorers.
func formErrors(invalid *errs.Invalid, rows []views.FormulaRow) map[string]string {
	out := map[string]string{}
	for _, e := range invalid.Errors {
		field, msg := e.Field, e.Message
		if name, ok := strings.CutPrefix(field, "reward_formula."); ok {
			// The last row of the scorer: the one "given twice".
			if i := lastRow(rows, name); i >= 0 && rows[i].Error == "" {
				rows[i].Error = sentence(scorers.Describe(name).Label, msg)
				continue
			}
			field, msg = "reward_formula", name+": "+msg
		}
		if strings.HasPrefix(field, "scorers") {
			field = "scorers"
		}
		if _, ok := out[field]; !ok {
			out[field] = sentence(fieldSubjects[field], msg)
		}
	}
	return out
}

func lastRow(rows []views.FormulaRow, scorer string) int {
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Scorer == scorer {
			return i
		}
	}
	return -1
}

// fieldSubjects name the form's fields in the sentences that refuse them.
var fieldSubjects = map[string]string{
	"golden_set_version_id":      "The golden set",
	"candidate.model_version_id": "The model version",
	"candidate.endpoint":         "The endpoint",
	"candidate":                  "The candidate",
	"judge.endpoint":             "The judge's endpoint",
	"judge.template":             "The judge template",
	"judge.embeddings_endpoint":  "The embeddings endpoint",
	"reward_formula":             "The formula",
}

// sentence makes a field's message ("is required", "must be …") a sentence
// that stands beside a form field alone: the field's subject first where
// the message starts with its verb, a capital and a full stop.
func sentence(subject, msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return msg
	}
	verb, _, _ := strings.Cut(msg, " ")
	switch verb {
	case "is", "are", "must", "has", "have", "needs", "cannot", "takes", "was":
		if subject != "" {
			msg = subject + " " + msg
		}
	}
	if r, size := utf8.DecodeRuneInString(msg); unicode.IsLower(r) {
		msg = string(unicode.ToUpper(r)) + msg[size:]
	}
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// EvaluationRunsOpen answers the address the start form once posted to,
// opened or reloaded: the evaluation page's start form.
func (h *Handlers) EvaluationRunsOpen(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, "/evaluations#start-evaluation")
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
	stalled, err := h.Eval.Stalled(ctx(c), r)
	if err != nil {
		return views.RunView{}, err
	}
	s := r.Summary
	m := views.RunView{ID: r.ID.String(), Kind: r.Kind, Status: r.Status, GoldenSet: row.GoldenSet, Candidate: row.Candidate,
		Mean: rewardText(s.MeanReward, s.CI), Formula: s.Formula, JudgeCost: fmt.Sprintf("$%.4f", s.JudgeCostUSD),
		AnswerCost: fmt.Sprintf("$%.4f", s.AnswerCostUSD), PausedReason: s.PausedReason, Error: s.Error,
		Started: views.When(row.CreatedAt), Finished: views.WhenPtr(s.FinishedAt),
		Done: r.Progress.Done, Total: r.Progress.Total, Invalid: s.Invalid, JudgeCalls: s.JudgeCalls,
		Running: r.Status == "queued" || r.Status == "running", CanResume: stalled && CallerOf(c).Role.AtLeast(auth.Admin)}
	if row.CreatedBy != "" {
		m.Started += " by " + row.CreatedBy
	}
	if whole {
		m.Loop = h.loopOrigin(c, "evaluation_run_id", m.ID)
	}
	if row.CandidateVersionID != nil {
		m.CandidateURL = "/models/versions/" + row.CandidateVersionID.String()
	}
	if !whole {
		return m, nil
	}
	baseline := map[string]string{}
	regressed := map[uuid.UUID]string{} // production's reward of each regressed item
	against, err := h.Eval.Compare(ctx(c), org, id)
	switch {
	case errors.Is(err, eval.ErrNoBaseline):
	case err != nil:
		return views.RunView{}, err
	default:
		cv := &views.ComparisonView{BaselineURL: "/evaluations/runs/" + against.BaselineRunID.String(), CandidateMean: reward3(against.CandidateMean),
			BaselineMean: reward3(against.BaselineMean), Margin: ftoa(against.Margin), Wins: against.Paired.Wins, Ties: against.Paired.Ties, Losses: against.Paired.Losses}
		for _, d := range against.Regressions {
			cv.Regressions = append(cv.Regressions, diffRow(d))
			regressed[d.SourceID] = reward3(d.BaselineReward)
		}
		for _, d := range against.NewFlags {
			cv.NewFlags = append(cv.NewFlags, diffRow(d))
		}
		for _, sp := range against.Splits {
			baseline[sp.Split] = reward3(sp.BaselineMean)
		}
		m.Comparison = cv
	}
	for _, sp := range r.Splits {
		m.Splits = append(m.Splits, views.SplitRowView{Split: sp.Split, Items: sp.Items, Mean: reward3(sp.CandidateMean), Baseline: baseline[sp.Split]})
	}
	m.Items, m.Columns, m.ScoreChips = runItems(r.Items, regressed)
	show, order := runItemsQuery(c, m.Comparison != nil)
	m.Filters, m.Items = filterItems(m.ID, show, order, m.Items, m.Comparison != nil)
	sortItems(m.Items, r.Items, order)
	m.RewardSort, m.SortURL = rewardSort(m.ID, show, order)
	return m, nil
}

// maxScoreColumns is how many scorers get a column each; a run with more
// shows each item's scores as chips in one column, to fit its card.
const maxScoreColumns = 4

// runItems puts a run's items in the report's shape: one column per
// scorer any item has, in name order, each item's scores lined up with
// them.
func runItems(items []eval.RunItem, regressed map[uuid.UUID]string) ([]views.RunItemView, []views.ScoreColumn, bool) {
	names := map[string]bool{}
	for _, it := range items {
		for name := range it.Scores {
			names[name] = true
		}
	}
	var cols []views.ScoreColumn
	for _, name := range slices.Sorted(maps.Keys(names)) {
		a := scorers.Describe(name)
		cols = append(cols, views.ScoreColumn{Name: name, Label: a.Label, Measures: a.Measures})
	}
	out := make([]views.RunItemView, 0, len(items))
	for _, it := range items {
		iv := views.RunItemView{SourceID: it.SourceID.String(), Split: it.Split, Query: it.Query, Answer: it.Answer, Reference: it.Reference,
			Reward: reward3(it.Reward), RewardExplanation: it.RewardExplanation, Critique: it.Critique, Invalid: it.Invalid, Safety: it.Safety,
			Baseline: regressed[it.SourceID]}
		for _, col := range cols {
			sv := views.ScoreView{Name: col.Name, Label: col.Label}
			if sc, ok := it.Scores[col.Name]; ok {
				sv.Explanation, sv.Invalid = sc.Explanation, sc.Invalid
				if sc.Invalid == "" {
					sv.Value = strconv.FormatFloat(sc.Value, 'f', 3, 64)
				}
			}
			iv.Scores = append(iv.Scores, sv)
		}
		out = append(out, iv)
	}
	return out, cols, len(cols) > maxScoreColumns
}

// The ways a run's items are shown: which (show=) and in what order
// (sort=).
const (
	showAll         = "all"
	showRegressions = "regressions"
	showInvalid     = "invalid"
	sortRewardUp    = "reward"
	sortRewardDown  = "-reward"
)

// runItemsQuery reads ?show= and ?sort=; anything else is the default (all
// items in the golden set's order), and regressions only when there is a
// production run to regress against.
func runItemsQuery(c echo.Context, compared bool) (show, order string) {
	show = c.QueryParam("show")
	if show != showInvalid && (show != showRegressions || !compared) {
		show = showAll
	}
	order = c.QueryParam("sort")
	if order != sortRewardUp && order != sortRewardDown {
		order = ""
	}
	return show, order
}

func runItemsURL(runID, show, order string) string {
	q := url.Values{}
	if show != showAll {
		q.Set("show", show)
	}
	if order != "" {
		q.Set("sort", order)
	}
	u := "/evaluations/runs/" + runID
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u + "#run-items"
}

// filterItems keeps the items show asks for, and says how many each way
// of showing them keeps.
func filterItems(runID, show, order string, items []views.RunItemView, compared bool) ([]views.FilterLink, []views.RunItemView) {
	keeps := map[string]func(views.RunItemView) bool{
		showAll:         func(views.RunItemView) bool { return true },
		showRegressions: func(it views.RunItemView) bool { return it.Baseline != "" },
		showInvalid:     func(it views.RunItemView) bool { return it.Invalid != "" },
	}
	links := []views.FilterLink{{Key: showAll, Label: "All items"}}
	if compared {
		links = append(links, views.FilterLink{Key: showRegressions, Label: "Regressions"})
	}
	links = append(links, views.FilterLink{Key: showInvalid, Label: "Not scored"})
	for i := range links {
		l := &links[i]
		l.URL, l.Active = runItemsURL(runID, l.Key, order), l.Key == show
		for _, it := range items {
			if keeps[l.Key](it) {
				l.Count++
			}
		}
	}
	return links, slices.DeleteFunc(items, func(it views.RunItemView) bool { return !keeps[show](it) })
}

// sortItems orders the items by reward when asked, items without one
// last either way; otherwise they keep the golden set's order.
func sortItems(items []views.RunItemView, all []eval.RunItem, order string) {
	if order == "" {
		return
	}
	rewards := make(map[string]*float64, len(all))
	for _, it := range all {
		rewards[it.SourceID.String()] = it.Reward
	}
	slices.SortStableFunc(items, func(a, b views.RunItemView) int {
		ra, rb := rewards[a.SourceID], rewards[b.SourceID]
		switch {
		case ra == nil && rb == nil:
			return 0
		case ra == nil:
			return 1
		case rb == nil:
			return -1
		case order == sortRewardDown:
			return cmp.Compare(*rb, *ra)
		}
		return cmp.Compare(*ra, *rb)
	})
}

// rewardSort is the reward column's order (aria-sort's word for it) and
// the link that turns it: none, then lowest first, then highest first.
func rewardSort(runID, show, order string) (state, next string) {
	switch order {
	case sortRewardUp:
		return "ascending", runItemsURL(runID, show, sortRewardDown)
	case sortRewardDown:
		return "descending", runItemsURL(runID, show, sortRewardUp)
	}
	return "", runItemsURL(runID, show, sortRewardUp)
}

func diffRow(d eval.ItemDiff) views.DiffRowView {
	return views.DiffRowView{Split: d.Split, Query: d.Query, CandidateAnswer: d.CandidateAnswer, BaselineAnswer: d.BaselineAnswer,
		CandidateReward: reward3(d.CandidateReward), BaselineReward: reward3(d.BaselineReward)}
}

// EvaluationRunResume carries a paused or stalled run on.
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
