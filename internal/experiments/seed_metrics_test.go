package experiments_test

import (
	"strings"
	"testing"

	"github.com/curate/curate/internal/experiments"
)

// The seed's success_metrics (the A/B panel's helpfulness, accuracy and
// latency, and the dimensions beside them) are taken for Curate's metrics,
// and the results average each unit's scores and then the units of each
// arm. The expected means are worked out by hand from the rows below.
func TestSeedMetricsAreTheDimensionAverages(t *testing.T) {
	e := newEnv(t)
	seed := []string{"helpfulness", "accuracy", "clarity", "safety", "latency", "thumbs_up_rate", "rating"}
	x := e.running(t, experiments.NewExperiment{Key: "seed-metrics", Metrics: seed, MinSamplePerArm: ptr(2)})
	want := "avg_helpfulness,avg_accuracy,avg_clarity,avg_safety,latency,thumbs_up_rate,avg_rating"
	if got := strings.Join(x.Metrics, ","); got != want {
		t.Fatalf("metrics %s, want %s", got, want)
	}
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at)
		SELECT $1, 1, u, a, now() - interval '1 hour', (SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $1)
		FROM (VALUES ('c1', 0), ('c2', 0), ('t1', 1), ('t2', 1), ('t3', 1)) AS v(u, a)`,
		x.ID); err != nil {
		t.Fatal(err)
	}
	// unit, helpfulness, accuracy, clarity, safety, latency, rating; and
	// one thumb per unit.
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO feedback (org_id, end_user_id, experiment_id, query, response, feedback_type,
			dim_helpfulness, dim_accuracy, dim_clarity, dim_safety, latency_ms, rating, source, content_hash)
		SELECT $1::uuid, u, $2::uuid, 'q', 'a', 'detailed'::feedback_type, h, a, c, s, l, r, 'api'::feedback_source, '\x00'::bytea
		FROM (VALUES ('c1', 5, 4, 3, 5, 1200, 4), ('c1', 3, 2, 3, 5, 800, 2), ('c2', 2, 5, 4, 4, 1400, 5),
		             ('t1', 5, 5, 5, 5, 1100, 5), ('t2', 4, 4, 2, 3, 900, 4), ('t3', 3, 3, 5, 4, 1300, 3)) AS v(u, h, a, c, s, l, r)
		UNION ALL
		SELECT $1::uuid, u, $2::uuid, 'q', 'a', k::feedback_type, NULL, NULL, NULL, NULL::int, NULL::int, NULL::int, 'api'::feedback_source, '\x00'::bytea
		FROM (VALUES ('c1', 'thumbs_up'), ('c2', 'thumbs_down'), ('t1', 'thumbs_up'), ('t2', 'thumbs_up'), ('t3', 'thumbs_down')) AS t(u, k)`,
		e.org, x.ID); err != nil {
		t.Fatal(err)
	}
	res, err := e.exp.Results(e.ctx, e.org, "seed-metrics")
	if err != nil {
		t.Fatal(err)
	}
	// Control: c1 averages its two rows (helpfulness (5+3)/2 = 4, accuracy
	// 3, clarity 3, safety 5, latency 1000, rating 3), c2 is its one row;
	// the arm is the mean of the two units. Treatment: the mean of t1-t3.
	means := map[string][2]float64{
		"avg_helpfulness": {(4.0 + 2) / 2, (5.0 + 4 + 3) / 3},
		"avg_accuracy":    {(3.0 + 5) / 2, (5.0 + 4 + 3) / 3},
		"avg_clarity":     {(3.0 + 4) / 2, (5.0 + 2 + 5) / 3},
		"avg_safety":      {(5.0 + 4) / 2, (5.0 + 3 + 4) / 3},
		"latency":         {(1000.0 + 1400) / 2, (1100.0 + 900 + 1300) / 3},
		"thumbs_up_rate":  {(1.0 + 0) / 2, (1.0 + 1 + 0) / 3},
		"avg_rating":      {(3.0 + 5) / 2, (5.0 + 4 + 3) / 3},
	}
	if len(res.Metrics) != len(means) {
		t.Fatalf("%d metrics in the results, want %d", len(res.Metrics), len(means))
	}
	for _, m := range res.Metrics {
		w, ok := means[m.Metric]
		if !ok {
			t.Errorf("unexpected metric %s", m.Metric)
			continue
		}
		for arm, units := range []int{2, 3} {
			a := m.Arms[arm]
			if a.N != units || a.Mean == nil {
				t.Errorf("%s arm %d: %d units, mean %v; want %d units", m.Metric, arm, a.N, a.Mean, units)
				continue
			}
			near(t, m.Metric+" "+a.Arm, *a.Mean, w[arm])
		}
	}
}
