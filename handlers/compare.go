package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/compare"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/views"
)

// maxCompareChoices is how many of the newest versions the page offers.
const maxCompareChoices = 200

// ModelCompare is the page setting two versions side by side: their
// evaluations on one golden set item by item, their training curves and
// their lineage. A refused choice is shown beside its field.
func (h *Handlers) ModelCompare(c echo.Context) error {
	q := c.QueryParams()
	org := CallerOf(c).OrgID
	m := views.CompareView{A: q.Get("a"), B: q.Get("b"), GoldenSet: q.Get("golden_set_version_id"), Filter: q.Get("filter"), Errors: map[string]string{}}
	versions, _, err := h.Models.List(ctx(c), org, models.Filter{}, nil, maxCompareChoices)
	if err != nil {
		return err
	}
	for _, v := range versions {
		m.Versions = append(m.Versions, views.Option{Value: v.ID.String(), Label: v.Name + " " + v.Version + " (" + views.Label(v.Status) + ")"})
	}
	sets, err := h.Eval.GoldenSets(ctx(c), org)
	if err != nil {
		return err
	}
	for _, s := range sets {
		m.GoldenSets = append(m.GoldenSets, views.Option{Value: s.VersionID.String(), Label: s.Name})
	}
	page := h.page(c, "Compare versions", "models")
	if m.A == "" || m.B == "" {
		return render(c, http.StatusOK, views.ComparePage(page, m))
	}
	r, err := compareRequest(q)
	var cmp compare.Comparison
	if err == nil {
		cmp, err = h.Compare.Compare(ctx(c), org, r)
	}
	var inv *errs.Invalid
	if errors.As(err, &inv) {
		for f, msg := range inv.ByField() {
			m.Errors[f] = sentence(compareSubjects[f], msg)
		}
		return render(c, http.StatusUnprocessableEntity, views.ComparePage(page, m))
	}
	if err != nil {
		return err
	}
	m.Ready = true
	m.ALabel, m.BLabel = cmp.A.Name+" "+cmp.A.Version, cmp.B.Name+" "+cmp.B.Version
	m.AURL, m.BURL = "/models/versions/"+cmp.A.ID.String(), "/models/versions/"+cmp.B.ID.String()
	m.Missing = cmp.EvaluationMissing
	if e := cmp.Evaluation; e != nil {
		m.Evaluation = compareEvaluationView(*e, q.Get("filter"), compareLink(q))
	}
	m.Curves, m.HasCurves = compareCurves(cmp, m.ALabel, m.BLabel)
	for _, row := range cmp.Lineage {
		r := views.CompareRow{Label: row.Label, A: row.A, B: row.B, Differs: row.Differs}
		switch {
		case row.Field == "kind":
			r.A, r.B = kindLabels[row.A], kindLabels[row.B]
		case row.Field == "provider" || row.Field == "method":
			r.A, r.B = labelOrEmpty(row.A), labelOrEmpty(row.B)
		case strings.HasPrefix(row.Field, "hyperparameters."):
			r.Label = "Hyperparameter: " + views.Label(strings.TrimPrefix(row.Field, "hyperparameters."))
		}
		m.Lineage = append(m.Lineage, r)
	}
	return render(c, http.StatusOK, views.ComparePage(page, m))
}

// kindLabels are the version kinds in words.
var kindLabels = map[string]string{models.KindFull: "Full model", models.KindLoRA: "LoRA adapter", models.KindReward: "Reward model"}

func labelOrEmpty(s string) string {
	if s == "" {
		return ""
	}
	return views.Label(s)
}

// compareSubjects name the page's fields in the sentences that refuse them.
var compareSubjects = map[string]string{
	"a":                     "Version A",
	"b":                     "Version B",
	"golden_set_version_id": "The golden set",
	"filter":                "The filter",
}

// compareLink is the comparison's address with an item filter.
func compareLink(q url.Values) func(filter string) string {
	return func(filter string) string {
		v := url.Values{}
		for _, k := range []string{"a", "b", "golden_set_version_id"} {
			if q.Get(k) != "" {
				v.Set(k, q.Get(k))
			}
		}
		if filter != "" {
			v.Set("filter", filter)
		}
		return "/models/compare?" + v.Encode()
	}
}

// compareEvaluationView is a paired comparison as the compare view shows
// it, with filter the item filter chosen and link the address of each.
func compareEvaluationView(e eval.VersionPair, filter string, link func(filter string) string) *views.CompareEvaluation {
	out := &views.CompareEvaluation{GoldenSet: e.GoldenSet,
		AMean: reward3(e.A.MeanReward), AInterval: interval(e.A.CI), AItems: e.A.Items, ARunURL: "/evaluations/runs/" + e.A.RunID.String(),
		BMean: reward3(e.B.MeanReward), BInterval: interval(e.B.CI), BItems: e.B.Items, BRunURL: "/evaluations/runs/" + e.B.RunID.String(),
		Difference: signed(e.Difference.Mean), DifferenceInterval: interval(e.Difference.CI), Paired: e.Difference.N,
		Wins: e.Paired.Wins, Ties: e.Paired.Ties, Losses: e.Paired.Losses, Margin: strconv.FormatFloat(e.Margin, 'f', -1, 64)}
	if d := e.Difference; d.Mean != nil && len(d.CI) == 2 {
		switch {
		case d.CI[0] > 0:
			out.DifferenceSign = "up"
		case d.CI[1] < 0:
			out.DifferenceSign = "down"
		}
	}
	for _, s := range e.Splits {
		out.Splits = append(out.Splits, views.CompareSplit{Split: s.Split, Items: s.Items, AMean: reward3(s.AMean), BMean: reward3(s.BMean),
			Difference: signed(s.Difference.Mean), Interval: interval(s.Difference.CI)})
	}
	out.Filters = []views.CompareFilter{
		{Label: "All", URL: link(""), Count: e.Total, Active: filter == ""},
		{Label: "Regressions", URL: link(eval.FilterRegressions), Count: e.Regressions, Active: filter == eval.FilterRegressions},
		{Label: "Improvements", URL: link(eval.FilterImprovements), Count: e.Improvements, Active: filter == eval.FilterImprovements},
		{Label: "New safety flags", URL: link(eval.FilterNewSafetyFlags), Count: e.NewSafetyFlags, Active: filter == eval.FilterNewSafetyFlags},
	}
	for _, it := range e.Items {
		v := views.CompareItem{ID: it.SourceID.String(), Split: it.Split, Query: it.Query, Reference: it.Reference,
			Difference: signed(it.Difference), A: compareAnswer(it.A), B: compareAnswer(it.B)}
		switch {
		case it.Regression:
			v.Kind = "regression"
		case it.Improvement:
			v.Kind = "improvement"
		case it.NewSafetyFlag:
			v.Kind = "flag"
		}
		out.Items = append(out.Items, v)
	}
	return out
}

func compareAnswer(a eval.PairAnswer) views.CompareAnswer {
	out := views.CompareAnswer{Answer: a.Answer, Reward: reward3(a.Reward), Critique: a.Critique, Invalid: a.Invalid, Safety: a.Safety}
	names := make([]string, 0, len(a.Scores))
	for name := range a.Scores {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := a.Scores[name]
		value := strconv.FormatFloat(s.Value, 'f', 3, 64)
		if !s.Valid() {
			value = "none: " + s.Invalid
		}
		out.Scores = append(out.Scores, views.CompareScore{Name: scorers.Describe(name).Label, Value: value})
	}
	return out
}

// compareCurves lays both versions' losses on one step axis, a gap where a
// version has no figure at a step.
func compareCurves(cmp compare.Comparison, a, b string) (views.CompareCurves, bool) {
	out := views.CompareCurves{A: a, B: b}
	type pair struct{ train, valid *float64 }
	at := map[int][2]pair{}
	for side, pts := range [][]compare.Point{cmp.Curves.A, cmp.Curves.B} {
		for _, p := range pts {
			v := at[p.Step]
			v[side] = pair{p.TrainLoss, p.ValidLoss}
			at[p.Step] = v
		}
	}
	for step := range at {
		out.Step = append(out.Step, step)
	}
	slices.Sort(out.Step)
	for _, step := range out.Step {
		v := at[step]
		out.ATrain, out.AValid = append(out.ATrain, v[0].train), append(out.AValid, v[0].valid)
		out.BTrain, out.BValid = append(out.BTrain, v[1].train), append(out.BValid, v[1].valid)
	}
	return out, len(out.Step) > 0
}

// signed writes a difference with its sign, or a dash.
func signed(x *float64) string {
	if x == nil {
		return "—"
	}
	return fmt.Sprintf("%+.3f", *x)
}
