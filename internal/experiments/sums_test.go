package experiments_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/experiments"
)

// TestKeptSumsFollowTheAnswers: the moments and incidents results sum from
// the units' kept values (migration 00170) equal those read from the
// answers by ExperimentListMetricMoments and ExperimentCountIncidents, to
// 1e-12, after every kind of change that moves a unit's values: new
// answers in the experiment, an answer dated into a unit's pre-exposure
// window, a correction made in review, a live score written, scored and
// flagged, an answer removed, a reported exposure of a unit whose answers
// came first, and a new CUPED window. The background fold leaves nothing
// to fold.
func TestKeptSumsFollowTheAnswers(t *testing.T) {
	e := newEnv(t)
	x := e.running(t, experiments.NewExperiment{Key: "sums", Metrics: []string{experiments.ThumbsUpRate, experiments.AvgRating,
		experiments.CorrectionRate, experiments.Latency, experiments.AvgJudgeScore}})
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := e.pool.Exec(e.ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// 40 units, each with answers of every kind in the phase and some
	// before its first exposure; a scorer for the live scores.
	exec(`INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at)
		SELECT $1, 1, 'u' || i, i % 2, now() - interval '1 hour', (SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $1) FROM generate_series(0, 39) AS i`, x.ID)
	answers := `INSERT INTO feedback (org_id, end_user_id, experiment_id, query, response, feedback_type, rating, latency_ms, correction,
			dim_accuracy, source, content_hash, created_at)
		SELECT $1, 'u' || (i % $4::int), $2, 'q' || i, 'a', (ARRAY['thumbs_up','thumbs_down','rating','correction','detailed']::feedback_type[])[1 + i % 5],
			CASE WHEN i % 5 = 2 THEN 1 + i % 5 END, 100 + (i * 37) % 900, CASE WHEN i % 7 = 0 THEN 'Better.' ELSE '' END,
			CASE WHEN i % 5 = 4 THEN 1 + i % 4 END, 'api', sha256(i::text::bytea), now() - $3::float8 * interval '1 hour'
		FROM generate_series($5::int, $6::int) AS i`
	exec(answers, e.org, x.ID, 0.0, 40, 0, 299)
	exec(answers, e.org, nil, 24.0*30, 40, 300, 301) // before any window
	exec(answers, e.org, nil, 72.0, 40, 302, 379)    // in the units' windows
	var scorer string
	if err := e.pool.QueryRow(e.ctx, `INSERT INTO live_scorers (org_id, experiment_id, endpoint, rate) VALUES ($1, $2, 'http://judge.invalid', 1) RETURNING id`,
		e.org, x.ID).Scan(&scorer); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO live_scores (scorer_id, feedback_id, org_id, status, score, feedback_at)
		SELECT $1, id, org_id, CASE WHEN seq % 4 = 0 THEN 'pending' ELSE 'scored' END, CASE WHEN seq % 4 = 0 THEN NULL ELSE (seq % 10) / 10.0 END, created_at
		FROM feedback WHERE org_id = $2 AND seq % 3 = 0`, scorer, e.org)

	check := func(step string) {
		t.Helper()
		kept, read, keptInc, readInc, err := e.exp.KeptAndRead(e.ctx, e.org, "sums")
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(read) == 0 {
			t.Fatalf("%s: no moments read", step)
		}
		if len(kept) != len(read) {
			t.Fatalf("%s: %d kept moments, %d read:\n%+v\n%+v", step, len(kept), len(read), kept, read)
		}
		for i := range read {
			k, r := kept[i], read[i]
			if k.Arm != r.Arm || k.Metric != r.Metric {
				t.Fatalf("%s: row %d is %d/%s kept, %d/%s read", step, i, k.Arm, k.Metric, r.Arm, r.Metric)
			}
			for j, pair := range [][2]float64{{k.N, r.N}, {k.Sum, r.Sum}, {k.SumSquares, r.SumSquares}, {k.PreN, r.PreN}, {k.PreSum, r.PreSum},
				{k.PreSumSquares, r.PreSumSquares}, {k.CrossSum, r.CrossSum}} {
				if math.Abs(pair[0]-pair[1]) > 1e-12*math.Max(1, math.Abs(pair[1])) {
					t.Errorf("%s: arm %d %s, sum %d: kept %v, read %v", step, r.Arm, r.Metric, j, pair[0], pair[1])
				}
			}
		}
		if fmt.Sprint(keptInc) != fmt.Sprint(readInc) {
			t.Errorf("%s: incidents kept %v, read %v", step, keptInc, readInc)
		}
	}
	check("made")
	var judged bool
	for _, r := range must(t)(e.exp.KeptAndRead(e.ctx, e.org, "sums")) {
		judged = judged || r.Metric == experiments.AvgJudgeScore
	}
	if !judged {
		t.Fatal("no judge scores in the moments")
	}

	exec(answers, e.org, x.ID, 0.0, 45, 400, 459) // new answers, and five new units' (exposed below)
	exec(`INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, phase_started_at)
		SELECT $1, 1, 'u' || i, i % 2, (SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $1) FROM generate_series(40, 43) AS i`, x.ID)
	check("new answers")
	exec(`INSERT INTO feedback (org_id, end_user_id, query, response, feedback_type, source, content_hash, created_at)
		VALUES ($1, 'u3', 'q', 'a', 'thumbs_up', 'api', '\x01', now() - interval '5 days')`, e.org)
	check("an answer dated into a pre-exposure window")
	exec(`UPDATE feedback SET correction = 'Fixed in review.' WHERE org_id = $1 AND end_user_id = 'u5' AND correction = '' AND experiment_id IS NOT NULL`, e.org)
	check("a correction")
	exec(`UPDATE live_scores SET status = 'scored', score = 0.9, safety_flag = true WHERE status = 'pending'`)
	exec(`INSERT INTO live_scores (scorer_id, feedback_id, org_id, status, score, safety_flag, feedback_at)
		SELECT $1, id, org_id, 'scored', 0.1, true, created_at FROM feedback WHERE org_id = $2 AND end_user_id = 'u7' AND experiment_id IS NOT NULL
		ON CONFLICT DO NOTHING`, scorer, e.org)
	check("live scores")
	exec(`DELETE FROM feedback WHERE org_id = $1 AND end_user_id = 'u9'`, e.org)
	check("answers removed")
	exec(answers, e.org, x.ID, 0.0, 1, 500, 502) // unit u0's, then reported as 'late'
	exec(`UPDATE feedback SET end_user_id = 'late' WHERE org_id = $1 AND content_hash IN (sha256('500'::bytea), sha256('501'::bytea), sha256('502'::bytea))`, e.org)
	check("answers before their exposure")
	if _, err := db.New(e.pool).ExposureInsertReported(e.ctx, db.ExposureInsertReportedParams{ExperimentID: x.ID, Phase: 1,
		UnitIds: []string{"late"}, Arms: []int32{1}, Ats: []time.Time{time.Now().Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	check("a reported exposure")
	seven := 7
	if _, err := e.exp.SetAnalysis(e.ctx, admin, e.org, "sums", experiments.Analysis{CUPEDDays: &seven}); err != nil {
		t.Fatal(err)
	}
	check("a new window")

	exec(answers, e.org, x.ID, 0.0, 40, 600, 640)
	if err := e.exp.FoldSums(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e, `SELECT count(*) FROM experiment_sums_dirty`); n != 0 {
		t.Errorf("%d end users left to fold after the background fold", n)
	}
	check("folded in the background")
}

func must(t *testing.T) func(kept, read []db.ExperimentListMetricMomentsRow, a, b []db.ExperimentCountIncidentsRow, err error) []db.ExperimentListMetricMomentsRow {
	return func(kept, _ []db.ExperimentListMetricMomentsRow, _, _ []db.ExperimentCountIncidentsRow, err error) []db.ExperimentListMetricMomentsRow {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return kept
	}
}
