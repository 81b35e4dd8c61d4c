package experiments_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/stats"
)

// running creates an experiment between two provider models (served by
// their ids, so starting needs no target) and starts it.
func (e env) running(t *testing.T, in experiments.NewExperiment) experiments.Experiment {
	t.Helper()
	v1 := e.register(t, "1.0.0", models.KindFull, "ft:gpt-4o-mini:acme::a")
	v2 := e.register(t, "1.1.0", models.KindFull, "ft:gpt-4o-mini:acme::b")
	in.ControlModelID, in.TreatmentModelID = v1.ID, v2.ID
	if _, err := e.exp.Create(e.ctx, admin, e.org, in); err != nil {
		t.Fatal(err)
	}
	x, err := e.exp.SetStatus(e.ctx, admin, e.org, in.Key, experiments.Running, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// unit is one simulated unit: its arm and its feedback, each item a
// thumb (up or down), a rating, or both, before its first exposure or
// after.
type unit struct {
	id   string
	arm  int
	pre  []fb
	post []fb
}

type fb struct {
	up     bool
	rating int // 0: none
}

// feed records the units' first exposures an hour ago and their feedback:
// the pre-exposure items three days before, the others now, attributed
// to the experiment.
func (e env) feed(t *testing.T, x experiments.Experiment, units []unit) {
	t.Helper()
	ids, arms := make([]string, len(units)), make([]int32, len(units))
	var users, types []string
	var ratings []int32
	var inExp []bool
	for i, u := range units {
		ids[i], arms[i] = u.id, int32(u.arm)
		for k, list := range [][]fb{u.pre, u.post} {
			for _, f := range list {
				kind := "thumbs_down"
				if f.up {
					kind = "thumbs_up"
				}
				if f.rating > 0 {
					kind = "rating"
				}
				users, types, ratings, inExp = append(users, u.id), append(types, kind), append(ratings, int32(f.rating)), append(inExp, k == 1)
			}
		}
	}
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at)
		SELECT $1, 1, u, a, now() - interval '1 hour', (SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $1) FROM unnest($2::text[], $3::int[]) AS x(u, a)`, x.ID, ids, arms); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO feedback (org_id, end_user_id, experiment_id, query, response, feedback_type, rating, source,
			content_hash, created_at)
		SELECT $1, u, CASE WHEN post THEN $2::uuid END, 'q', 'a', k::feedback_type, nullif(r, 0), 'api', '\x00',
			CASE WHEN post THEN now() ELSE now() - interval '3 days' END
		FROM unnest($3::text[], $4::text[], $5::int[], $6::bool[]) AS f(u, k, r, post)`, e.org, x.ID, users, types, ratings, inExp); err != nil {
		t.Fatal(err)
	}
}

// thumbsArm is what the engine should read for an arm's thumbs-up rate,
// summed here from the simulated units themselves: per unit the mean of
// its thumbs after exposure (y) and before (x, 0 without history).
func thumbsArm(units []unit, arm int, cuped bool) stats.Arm {
	var a stats.Arm
	var c stats.Covariate
	mean := func(list []fb) (float64, bool) {
		n, up := 0.0, 0.0
		for _, f := range list {
			if f.rating == 0 {
				n++
				if f.up {
					up++
				}
			}
		}
		return up / n, n > 0
	}
	for _, u := range units {
		y, ok := mean(u.post)
		if u.arm != arm || !ok {
			continue
		}
		x, _ := mean(u.pre)
		if math.IsNaN(x) {
			x = 0
		}
		a.N, a.Sum, a.SumSquares = a.N+1, a.Sum+y, a.SumSquares+y*y
		c.Sum, c.SumSquares, c.CrossSum = c.Sum+x, c.SumSquares+x*x, c.CrossSum+x*y
	}
	if cuped {
		a.Covariate = &c
	}
	return a
}

// simulate makes n units per arm whose thumbs-up propensity lasts from
// before their exposure to after: a unit's earlier feedback predicts its
// later feedback, which is what CUPED uses. The treatment adds lift to the
// propensity. Every fifth unit has no history.
func simulate(n int, lift float64, seed uint64) []unit {
	r := rand.New(rand.NewPCG(seed, 1))
	var out []unit
	for arm := range 2 {
		for i := range n {
			p := 0.05 + 0.9*r.Float64()
			u := unit{id: fmt.Sprintf("u-%d-%d", arm, i), arm: arm}
			if i%5 != 0 {
				for range 10 {
					u.pre = append(u.pre, fb{up: r.Float64() < p})
				}
			}
			q := p
			if arm == 1 {
				q = min(1, p+lift)
			}
			for range 10 {
				u.post = append(u.post, fb{up: r.Float64() < q})
			}
			out = append(out, u)
		}
	}
	return out
}

// A simulated experiment whose units' earlier feedback predicts their
// later feedback: with CUPED the results read each unit's feedback in the
// 14 days before its first exposure as its covariate, and the treatment's
// interval is narrower than without it, by the variance reduction shown.
// The numbers are what stats.Compare (tested against GrowthBook's
// published values) gives for sums taken here from the simulated units
// themselves, so the query's per-unit means, pre-exposure window and
// zero covariates for units without history are checked too.
func TestResultsCUPED(t *testing.T) {
	e := newEnv(t)
	x := e.running(t, experiments.NewExperiment{Key: "cuped", Metrics: []string{experiments.ThumbsUpRate}, MinSamplePerArm: ptr(2)})
	if x.Analysis.CUPEDDays == nil || *x.Analysis.CUPEDDays != experiments.DefaultCUPEDDays {
		t.Fatalf("default pre-exposure window: %+v", x.Analysis)
	}
	units := simulate(300, 0.06, 11)
	e.feed(t, x, units)
	r, err := e.exp.Results(e.ctx, e.org, "cuped")
	if err != nil {
		t.Fatal(err)
	}
	if r.CUPEDDays != 14 || r.Engine != stats.EngineFrequentist {
		t.Fatalf("results' analysis: %d days, %s", r.CUPEDDays, r.Engine)
	}
	tr := r.Metrics[0].Arms[1]
	test := stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05, Alternative: stats.TwoSided}
	want, err := stats.Compare(thumbsArm(units, 0, true), thumbsArm(units, 1, true), test)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stats.Compare(thumbsArm(units, 0, false), thumbsArm(units, 1, false), test)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "relative change", *tr.RelativeChange, want.Expected)
	near(t, "ci low", *tr.CI[0], *want.CI[0])
	near(t, "ci high", *tr.CI[1], *want.CI[1])
	near(t, "unadjusted ci low", *tr.UnadjustedCI[0], *raw.CI[0])
	near(t, "variance reduction", *tr.VarianceReduction, 1-want.SE*want.SE/(raw.SE*raw.SE))
	if *tr.VarianceReduction < 0.2 {
		t.Errorf("variance reduction %.3f: the pre-period predicts the metric, so CUPED should remove much of it", *tr.VarianceReduction)
	}
	width := *tr.CI[1] - *tr.CI[0]
	if rawWidth := *tr.UnadjustedCI[1] - *tr.UnadjustedCI[0]; !(width < rawWidth) {
		t.Errorf("CUPED interval %.4f wide, unadjusted %.4f", width, rawWidth)
	}
	if tr.WithoutHistory != 60 || r.Metrics[0].Arms[0].WithoutHistory != 60 {
		t.Errorf("units without history: %d and %d, want 60 each", r.Metrics[0].Arms[0].WithoutHistory, tr.WithoutHistory)
	}
	// Turned off, the same data gives the unadjusted interval.
	off := 0
	if _, err := e.exp.SetAnalysis(e.ctx, admin, e.org, "cuped", experiments.Analysis{CUPEDDays: &off}); err != nil {
		t.Fatal(err)
	}
	r, err = e.exp.Results(e.ctx, e.org, "cuped")
	if err != nil {
		t.Fatal(err)
	}
	tr = r.Metrics[0].Arms[1]
	near(t, "ci without CUPED", *tr.CI[0], *raw.CI[0])
	if tr.VarianceReduction != nil || tr.WithoutHistory != 0 {
		t.Errorf("without CUPED: %+v", tr)
	}
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %.10g, want %.10g", what, got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// Four goal metrics are corrected together (Benjamini–Hochberg by
// default) and the guardrail alone (Holm, which leaves one p-value as it
// is): each treatment shows its adjusted p-value beside the raw one, and
// the results say how many metrics each family adjusted for. Holm, when
// chosen, gives the step-down values.
func TestResultsCorrections(t *testing.T) {
	e := newEnv(t)
	goals := []string{experiments.ThumbsUpRate, experiments.AvgRating, experiments.CorrectionRate, experiments.AvgHelpfulness}
	x := e.running(t, experiments.NewExperiment{Key: "four", Metrics: goals, Guardrails: []string{experiments.Latency}, MinSamplePerArm: ptr(2)})
	r := rand.New(rand.NewPCG(5, 5))
	var units []unit
	for arm := range 2 {
		for i := range 200 {
			u := unit{id: fmt.Sprintf("u-%d-%d", arm, i), arm: arm}
			u.post = append(u.post, fb{up: r.Float64() < 0.5+0.1*float64(arm)}, fb{rating: 1 + r.IntN(5)})
			units = append(units, u)
		}
	}
	e.feed(t, x, units)
	// Detailed scores and latency for every unit, after exposure.
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO feedback (org_id, end_user_id, experiment_id, query, response, feedback_type, dim_helpfulness,
			latency_ms, correction, source, content_hash)
		SELECT $1, x.unit_id, $2, 'q', 'a', 'detailed', 1 + (hashtext(x.unit_id) & 3), 800 + (hashtext(x.unit_id) & 255),
			CASE WHEN hashtext(x.unit_id) % 3 = 0 THEN 'better' ELSE '' END, 'api', '\x00'
		FROM experiment_exposures x WHERE x.experiment_id = $2`, e.org, x.ID); err != nil {
		t.Fatal(err)
	}
	res, err := e.exp.Results(e.ctx, e.org, "four")
	if err != nil {
		t.Fatal(err)
	}
	var ps, adjusted []float64
	for _, m := range res.Metrics[:4] {
		tr := m.Arms[1]
		if tr.PValue == nil || tr.AdjustedPValue == nil {
			t.Fatalf("%s: no p-value: %+v", m.Metric, tr)
		}
		ps, adjusted = append(ps, *tr.PValue), append(adjusted, *tr.AdjustedPValue)
	}
	for i, want := range stats.BenjaminiHochberg(ps) {
		near(t, "adjusted p of "+goals[i], adjusted[i], want)
	}
	if adjusted[0] == ps[0] && adjusted[1] == ps[1] && adjusted[2] == ps[2] {
		t.Errorf("nothing adjusted: %v", ps)
	}
	if len(res.Corrections) != 2 || res.Corrections[0] != (experiments.Correction{Family: "goal", Method: "bh", Metrics: 4, IntervalAlpha: res.Corrections[0].IntervalAlpha}) ||
		res.Corrections[1].Method != "holm" || res.Corrections[1].Metrics != 1 || res.Corrections[1].IntervalAlpha != 0.05 {
		t.Errorf("corrections: %+v", res.Corrections)
	}
	if g := res.Metrics[4].Arms[1]; g.AdjustedPValue == nil || *g.AdjustedPValue != *g.PValue {
		t.Errorf("a lone guardrail's p-value: %+v", g)
	}
	if _, err := e.exp.SetAnalysis(e.ctx, admin, e.org, "four", experiments.Analysis{GoalCorrection: stats.CorrectionHolm}); err != nil {
		t.Fatal(err)
	}
	if res, err = e.exp.Results(e.ctx, e.org, "four"); err != nil {
		t.Fatal(err)
	}
	holm := stats.Holm(ps)
	for i := range goals {
		near(t, "holm p of "+goals[i], *res.Metrics[i].Arms[1].AdjustedPValue, holm[i])
	}
	near(t, "Bonferroni interval alpha", res.Corrections[0].IntervalAlpha, 0.0125)
}

// The case: thumbs-up 3% higher in the treatment, significantly,
// against a minimum improvement of 5%: not recommended for deploy, and the
// reason names the criterion. Without the criterion the same data deploys.
func TestResultsMinimumImprovement(t *testing.T) {
	e := newEnv(t)
	x := e.running(t, experiments.NewExperiment{Key: "plus3", Analysis: experiments.Analysis{MinImprovement: map[string]float64{experiments.ThumbsUpRate: 0.05}}})
	// 20,000 units per arm: 50% thumbs up in the control, 51.5% (+3%) in
	// the treatment, exactly.
	var units []unit
	for arm, ups := range []int{10000, 10300} {
		for i := range 20000 {
			units = append(units, unit{id: fmt.Sprintf("u-%d-%d", arm, i), arm: arm, post: []fb{{up: i < ups}}})
		}
	}
	e.feed(t, x, units)
	r, err := e.exp.Results(e.ctx, e.org, "plus3")
	if err != nil {
		t.Fatal(err)
	}
	tr := r.Metrics[0].Arms[1]
	near(t, "relative change", *tr.RelativeChange, 0.03)
	if !tr.Significant || *tr.CI[0] <= 0 {
		t.Fatalf("+3%% on 20,000 units per arm is significant: %+v", tr)
	}
	if r.Metrics[0].Criterion == nil || *r.Metrics[0].Criterion != 0.05 {
		t.Errorf("criterion: %v", r.Metrics[0].Criterion)
	}
	if r.Recommendation.Action == stats.DeployTreatment || !strings.Contains(r.Recommendation.Reason, "minimum improvement of +5.0%") {
		t.Errorf("recommendation: %+v", r.Recommendation)
	}
	if _, err := e.exp.SetAnalysis(e.ctx, admin, e.org, "plus3", experiments.Analysis{}); err != nil {
		t.Fatal(err)
	}
	if r, err = e.exp.Results(e.ctx, e.org, "plus3"); err != nil {
		t.Fatal(err)
	}
	if r.Recommendation.Action != stats.DeployTreatment || !strings.Contains(r.Recommendation.Reason, "The split is sound") {
		t.Errorf("without a criterion: %+v", r.Recommendation)
	}
}

// The organisation's default engine decides an experiment's results unless
// the experiment names its own; the Bayesian results carry the chance to
// win and the risks, and the default is an admin's audited choice.
func TestResultsDefaultEngine(t *testing.T) {
	e := newEnv(t)
	x := e.running(t, experiments.NewExperiment{Key: "bayes", MinSamplePerArm: ptr(2)})
	units := simulate(200, 0.1, 3)
	e.feed(t, x, units)
	if engine, err := e.exp.DefaultEngine(e.ctx, e.org); err != nil || engine != stats.EngineFrequentist {
		t.Fatalf("default engine: %q, %v", engine, err)
	}
	if err := e.exp.SetDefaultEngine(e.ctx, admin, e.org, "neither"); !errors.As(err, new(*errs.Invalid)) {
		t.Errorf("an unknown engine: %v", err)
	}
	if err := e.exp.SetDefaultEngine(e.ctx, admin, e.org, stats.EngineBayesian); err != nil {
		t.Fatal(err)
	}
	r, err := e.exp.Results(e.ctx, e.org, "bayes")
	if err != nil {
		t.Fatal(err)
	}
	tr := r.Metrics[0].Arms[1]
	if r.Engine != stats.EngineBayesian || tr.ChanceToWin == nil || len(tr.Risk) != 2 || tr.PValue != nil || len(r.Corrections) != 0 {
		t.Fatalf("Bayesian results: %s %+v", r.Engine, tr)
	}
	want, err := stats.CompareBayesian(thumbsArm(units, 0, true), thumbsArm(units, 1, true),
		stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05}, stats.Bayesian{})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "chance to win", *tr.ChanceToWin, want.ChanceToWin)
	near(t, "treatment's risk", tr.Risk[1], want.Risk[1])
	if !strings.Contains(strings.ToLower(r.Recommendation.Reason), "chance to win") {
		t.Errorf("a Bayesian reason: %q", r.Recommendation.Reason)
	}
	var n int
	if err := e.pool.QueryRow(e.ctx, "SELECT count(*) FROM audit_log WHERE action = 'experiments.default_engine'").Scan(&n); err != nil || n != 1 {
		t.Errorf("audit records: %d, %v", n, err)
	}
	// The experiment's own engine wins over the default.
	if _, err := e.exp.SetAnalysis(e.ctx, admin, e.org, "bayes", experiments.Analysis{Engine: stats.EngineFrequentist}); err != nil {
		t.Fatal(err)
	}
	if r, err = e.exp.Results(e.ctx, e.org, "bayes"); err != nil || r.Engine != stats.EngineFrequentist || r.Metrics[0].Arms[1].PValue == nil {
		t.Errorf("the experiment's own engine: %s, %v", r.Engine, err)
	}
}

// An experiment's analysis is refused field by field: an engine, a
// pre-exposure window, a correction, criteria naming metrics the
// experiment does not have in that role or out of range, thresholds.
func TestAnalysisRefusals(t *testing.T) {
	e := newEnv(t)
	v1 := e.register(t, "1.0.0", models.KindFull, "ft:gpt-4o-mini:acme::a")
	v2 := e.register(t, "1.1.0", models.KindFull, "ft:gpt-4o-mini:acme::b")
	_, err := e.exp.Create(e.ctx, admin, e.org, experiments.NewExperiment{Key: "bad", ControlModelID: v1.ID, TreatmentModelID: v2.ID,
		Guardrails: []string{experiments.Latency}, Analysis: experiments.Analysis{Engine: "both", CUPEDDays: ptr(91), GoalCorrection: "sidak",
			MinImprovement: map[string]float64{experiments.Latency: 0.1, experiments.ThumbsUpRate: -1}, MaxHarm: map[string]float64{experiments.AvgRating: 0.1},
			ChanceToWin: ptr(0.3), MaxRisk: ptr(0.0)}})
	var inv *errs.Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("refused: %v", err)
	}
	got := inv.ByField()
	for _, f := range []string{"engine", "cuped_days", "goal_correction", "min_improvement.latency", "min_improvement.thumbs_up_rate",
		"max_harm.avg_rating", "chance_to_win", "max_risk"} {
		if got[f] == "" {
			t.Errorf("no message on %s: %v", f, got)
		}
	}
	var n int
	if err := e.pool.QueryRow(e.ctx, "SELECT count(*) FROM experiments").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d experiments stored", n)
	}
}
