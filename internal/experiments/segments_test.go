package experiments_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/stats"
)

// Two segments of opposite effect: on the free plan the treatment lifts
// the thumbs-up rate from 40% to 60%, on the pro plan it drops it from 70%
// to 55%, and overall it helps a little. Each segment's effect is the one
// a per-segment analysis gives when done by hand (the arms' sums counted
// here from the simulated units, the p-values Holm-corrected over the
// segments, the intervals at the corrected level), to 4 decimals; the pro
// segment is flagged as harmed.
func TestResultsBySegment(t *testing.T) {
	e := newEnv(t)
	x := e.running(t, experiments.NewExperiment{Key: "plans", MinSamplePerArm: ptr(50),
		Analysis: experiments.Analysis{GoalCorrection: stats.CorrectionHolm}})
	type u struct {
		id, plan string
		arm      int
		up       bool
	}
	var units []u
	rates := map[string][2]int{"free": {40, 60}, "pro": {70, 55}} // thumbs up per 100 units, by arm
	for plan, r := range rates {
		for arm := range 2 {
			for i := range 100 {
				units = append(units, u{id: fmt.Sprintf("%s-%d-%d", plan, arm, i), plan: plan, arm: arm, up: i < r[arm]})
			}
		}
	}
	// A few units on no plan at all: a segment too small to read.
	for arm := range 2 {
		for i := range 5 {
			units = append(units, u{id: fmt.Sprintf("none-%d-%d", arm, i), arm: arm, up: i%2 == 0})
		}
	}
	var ids, plans, kinds []string
	var arms []int32
	for _, un := range units {
		ids, plans, arms = append(ids, un.id), append(plans, un.plan), append(arms, int32(un.arm))
		kind := "thumbs_down"
		if un.up {
			kind = "thumbs_up"
		}
		kinds = append(kinds, kind)
	}
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at)
		SELECT $1, 1, u, a, now() - interval '1 hour', (SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $1) FROM unnest($2::text[], $3::int[]) AS x(u, a)`, x.ID, ids, arms); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO feedback (org_id, end_user_id, experiment_id, query, response, feedback_type, source, content_hash, context)
		SELECT $1, u, $2, 'q', 'a', k::feedback_type, 'api', '\x00', CASE WHEN p = '' THEN '{}' ELSE jsonb_build_object('plan', p) END
		FROM unnest($3::text[], $4::text[], $5::text[]) AS f(u, k, p)`, e.org, x.ID, ids, kinds, plans); err != nil {
		t.Fatal(err)
	}
	overall, err := e.exp.Results(e.ctx, e.org, "plans")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.exp.ResultsBySegment(e.ctx, e.org, "plans", "context.plan", overall)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Segments) != 3 || got.MinUnits != 50 {
		t.Fatalf("%d segments (min %d): %+v", len(got.Segments), got.MinUnits, got.Segments)
	}
	by := map[string]experiments.Segment{}
	for _, s := range got.Segments {
		by[s.Value] = s
	}
	// By hand: each segment's arms summed from the units, the test the
	// experiments use, and Holm over the three segments' p-values (the
	// small segment is tested too, and flagged).
	hand := map[string][2]stats.Arm{}
	for _, un := range units {
		a := hand[un.plan]
		y := 0.0
		if un.up {
			y = 1
		}
		a[un.arm].N, a[un.arm].Sum, a[un.arm].SumSquares = a[un.arm].N+1, a[un.arm].Sum+y, a[un.arm].SumSquares+y*y
		hand[un.plan] = a
	}
	test := stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05, Alternative: stats.TwoSided}
	order := []string{"free", "pro", ""}
	var ps []float64
	for _, plan := range order {
		eff, err := stats.Compare(hand[plan][0], hand[plan][1], test)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, *eff.PValue)
	}
	adjusted, alpha := stats.Adjust(stats.CorrectionHolm, ps, 0.05)
	test.Alpha = alpha
	for i, plan := range order {
		s := by[plan]
		tr := s.Metrics[0].Arms[1]
		eff, err := stats.Compare(hand[plan][0], hand[plan][1], test)
		if err != nil {
			t.Fatal(err)
		}
		if s.Units[0] != int64(hand[plan][0].N) || s.Units[1] != int64(hand[plan][1].N) {
			t.Errorf("segment %q: units %v, counted %v and %v", plan, s.Units, hand[plan][0].N, hand[plan][1].N)
		}
		if tr.RelativeChange == nil || tr.AdjustedPValue == nil || len(tr.CI) != 2 {
			t.Fatalf("segment %q: no effect: %+v", plan, tr)
		}
		for name, pair := range map[string][2]float64{
			"relative change": {*tr.RelativeChange, eff.Expected},
			"adjusted p":      {*tr.AdjustedPValue, adjusted[i]},
			"interval low":    {*tr.CI[0], *eff.CI[0]},
			"interval high":   {*tr.CI[1], *eff.CI[1]},
		} {
			if math.Abs(pair[0]-pair[1]) > 5e-5 {
				t.Errorf("segment %q %s: %.6f, by hand %.6f", plan, name, pair[0], pair[1])
			}
		}
	}
	// The plain arithmetic of the relative changes: 60/40 − 1 and 55/70 − 1.
	if v := *by["free"].Metrics[0].Arms[1].RelativeChange; math.Abs(v-0.5) > 1e-9 {
		t.Errorf("free: relative change %v, want 0.5", v)
	}
	if v := *by["pro"].Metrics[0].Arms[1].RelativeChange; math.Abs(v-(55.0/70-1)) > 1e-9 {
		t.Errorf("pro: relative change %v, want %v", v, 55.0/70-1)
	}
	if o := *overall.Metrics[0].Arms[1].RelativeChange; o <= 0 {
		t.Fatalf("overall effect %v: the data should help overall", o)
	}
	if !slices.Contains(by["pro"].Harmful, experiments.ThumbsUpRate) || len(by["free"].Opposite) != 0 {
		t.Errorf("pro harmed %v, free opposite %v", by["pro"].Harmful, by["free"].Opposite)
	}
	if !by[""].TooSmall || by["free"].TooSmall {
		t.Errorf("too small: none %v, free %v", by[""].TooSmall, by["free"].TooSmall)
	}
	if _, err := e.exp.ResultsBySegment(e.ctx, e.org, "plans", "plan", overall); !errors.As(err, new(*errs.Invalid)) {
		t.Errorf("an unknown dimension: %v", err)
	}
}
