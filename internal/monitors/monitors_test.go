package monitors_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/monitors"
	"github.com/curate/curate/internal/stats"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Each monitor against its default threshold: breached above it, within
// it below, and not judged on too few items.
func TestRead(t *testing.T) {
	st := monitors.Defaults()
	state := func(rs []monitors.Reading, kind string) string {
		for _, r := range rs {
			if r.Kind == kind {
				switch {
				case r.Breached:
					return "breached"
				case r.Ready:
					return "ok"
				}
				return "waiting"
			}
		}
		return "missing"
	}
	cases := []struct {
		name string
		w    monitors.Window
		kind string
		want string
	}{
		{"slow", monitors.Window{WithLatency: 30, LatencyP95: 2400}, monitors.KindLatency, "breached"},
		{"fast enough", monitors.Window{WithLatency: 30, LatencyP95: 2000}, monitors.KindLatency, "ok"},
		{"few latencies", monitors.Window{WithLatency: 19, LatencyP95: 9000}, monitors.KindLatency, "waiting"},
		// 70 against 100 a week ago: a 30% drop.
		{"feedback dropped", monitors.Window{Feedback: 70, BaselineFeedback: 100}, monitors.KindFeedbackRate, "breached"},
		{"feedback steady", monitors.Window{Feedback: 85, BaselineFeedback: 100}, monitors.KindFeedbackRate, "ok"},
		{"no baseline", monitors.Window{Feedback: 0, BaselineFeedback: 5}, monitors.KindFeedbackRate, "waiting"},
		// 2 errors of 100 is 2%, over 1%; 1 of 100 is not over it.
		{"errors", monitors.Window{Feedback: 100, Errors: 2}, monitors.KindErrorRate, "breached"},
		{"one error", monitors.Window{Feedback: 100, Errors: 1}, monitors.KindErrorRate, "ok"},
		{"first week", monitors.Window{Scores: []float64{0.1, 0.2}}, monitors.KindScoreShift, "waiting"},
	}
	for _, c := range cases {
		if got := state(monitors.Read(st, c.w), c.kind); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// The score distribution: the ks_scores samples of the statistics
	// package's tests differ (SciPy's ks_2samp p = 1.4e-16), and a sample
	// against itself does not.
	ref, cur := scoresSample(0.8, 60), scoresSample(0.4, 60)
	rs := monitors.Read(st, monitors.Window{Reference: ref, Scores: cur})
	if state(rs, monitors.KindScoreShift) != "breached" {
		t.Errorf("shifted scores: %+v", rs[3])
	}
	if want, _ := stats.KS2Sample(ref, cur); rs[3].PValue == nil || *rs[3].PValue != want.PValue {
		t.Errorf("the KS reading %+v, want p %v", rs[3], want.PValue)
	}
	if rs := monitors.Read(st, monitors.Window{Reference: ref, Scores: ref}); state(rs, monitors.KindScoreShift) != "ok" {
		t.Errorf("the same scores: %+v", rs[3])
	}
	st.ShiftTest = monitors.ShiftPSI
	rs = monitors.Read(st, monitors.Window{Reference: ref, Scores: cur})
	if want, _ := stats.PSI(ref, cur, stats.EqualBins(0, 1, 10)); state(rs, monitors.KindScoreShift) != "breached" || rs[3].Value != want {
		t.Errorf("PSI reading %+v, want %v", rs[3], want)
	}
}

// scoresSample is n scores spread evenly around mid (±0.15).
func scoresSample(mid float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = mid - 0.15 + 0.3*float64(i)/float64(n-1)
	}
	return out
}

func TestSettingsRefusals(t *testing.T) {
	st := monitors.Defaults()
	st.WindowHours, st.FeedbackDrop, st.ShiftTest, st.ErrorRate = 0, 1.2, "t-test", 0
	err := st.Validate()
	if err == nil || !strings.Contains(err.Error(), "window_hours") {
		t.Fatalf("refused: %v", err)
	}
	for _, f := range []string{"feedback_drop", "shift_test", "error_rate"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("no message on %s: %v", f, err)
		}
	}
}

// A served version breaching each monitor: its alert opens (one per
// monitor, linking to the evidence), a running rollout whose treatment it
// is rolls back as on a guardrail's breach, and the alerts resolve once
// the monitors no longer find the breach.
func TestMonitorsAlertAndRollBack(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	admin := audit.Actor{Kind: "system", Label: "ops"}
	reg := models.New(pool, jobs, nil, nil)
	var ids []uuid.UUID
	for _, v := range []string{"1.0.0", "1.1.0"} {
		mv, err := reg.Register(ctx, admin, org.ID, models.NewVersion{Name: "support", Version: v, ModelID: "ft:gpt-4o-mini:acme::" + v,
			Kind: models.KindFull})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, mv.ID)
	}
	exp := experiments.New(pool, reg)
	if _, err := exp.Create(ctx, admin, org.ID, experiments.NewExperiment{Key: "roll", ControlModelID: ids[0], TreatmentModelID: ids[1],
		Rollout: &experiments.Rollout{Steps: []float64{0.1, 0.5, 1}, HoldMins: 60}}); err != nil {
		t.Fatal(err)
	}
	x, err := exp.SetStatus(ctx, admin, org.ID, "roll", experiments.Running, "", "")
	if err != nil {
		t.Fatal(err)
	}
	// Served ten days: its first week is the scores' reference.
	if _, err := pool.Exec(ctx, "UPDATE experiments SET started_at = now() - interval '10 days' WHERE id = $1", x.ID); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// The treatment's last half hour: 25 answers taking 3 s, 5 of them
	// errors; the same hour a week ago: 100 answers under its model id.
	// Its live scores were about 0.8 in its first week and about 0.3 now.
	exec(`INSERT INTO feedback (org_id, end_user_id, experiment_id, experiment_arm, query, response, feedback_type, latency_ms, is_error,
			source, content_hash, created_at)
		SELECT $1, 'u-' || i, $2, 'treatment', 'q', 'a', 'thumbs_up', 3000, i < 5, 'api', '\x00', now() - interval '30 minutes'
		FROM generate_series(0, 24) i`, org.ID, x.ID)
	exec(`INSERT INTO feedback (org_id, model, query, response, feedback_type, source, content_hash, created_at)
		SELECT $1, 'ft:gpt-4o-mini:acme::1.1.0', 'q', 'a', 'thumbs_up', 'api', '\x00', now() - interval '7 days 30 minutes'
		FROM generate_series(1, 100)`, org.ID)
	exec(`INSERT INTO feedback (org_id, model, query, response, feedback_type, source, content_hash, created_at)
		SELECT $1, 'ft:gpt-4o-mini:acme::1.1.0', 'old ' || i, 'a', 'thumbs_up', 'api', '\x00', now() - interval '8 days'
		FROM generate_series(1, 40) i`, org.ID)
	exec(`INSERT INTO live_scorers (org_id, experiment_id, endpoint, rate) VALUES ($1, $2, 'judge', 1)`, org.ID, x.ID)
	exec(`INSERT INTO live_scores (scorer_id, feedback_id, org_id, status, score)
		SELECT (SELECT id FROM live_scorers), f.id, $1, 'scored',
			CASE WHEN f.query LIKE 'old %' THEN 0.7 + (hashtext(f.id::text) & 255) / 1275.0 ELSE 0.2 + (hashtext(f.id::text) & 255) / 1275.0 END
		FROM feedback f WHERE f.query LIKE 'old %' OR f.experiment_id IS NOT NULL`, org.ID)

	mon := monitors.New(pool)
	al := alerts.New(pool, nil, nil, nil, mon, nil)
	now := time.Now()
	res, err := al.Evaluate(ctx, org.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	opened := map[string]json.RawMessage{}
	for _, a := range res.Opened {
		opened[a.Kind] = a.Details
		if a.DedupKey != a.Kind+":"+ids[1].String() || !strings.Contains(a.Title, "support 1.1.0") {
			t.Errorf("alert %s: key %s, title %q", a.Kind, a.DedupKey, a.Title)
		}
	}
	for _, kind := range monitors.Kinds {
		if opened[kind] == nil {
			t.Errorf("no %s alert; opened %v", kind, res.Opened)
		} else if got := alerts.Evidence(opened[kind]); got != monitors.EvidenceURL(ids[1]) {
			t.Errorf("%s evidence %q", kind, got)
		}
	}
	if len(res.Opened) != len(monitors.Kinds) {
		t.Errorf("%d alerts opened: the control has no feedback and should have none", len(res.Opened))
	}
	// The rollout treats the open breach as a guardrail's.
	if err := exp.CheckRollouts(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := exp.Get(ctx, org.ID, "roll")
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != experiments.Paused || !strings.Contains(after.StopReason, "production monitor") || after.Arms[1].Weight != 0 {
		t.Errorf("after the rollout's check: %s, weight %v, %q", after.Status, after.Arms[1].Weight, after.StopReason)
	}
	// Turned off, the monitors find nothing and the alerts resolve.
	off := monitors.Defaults()
	off.Enabled = false
	if err := mon.SaveSettings(ctx, admin, org.ID, off); err != nil {
		t.Fatal(err)
	}
	if res, err = al.Evaluate(ctx, org.ID, now.Add(time.Minute)); err != nil || res.Resolved != len(monitors.Kinds) {
		t.Errorf("resolved %d, %v", res.Resolved, err)
	}
}
