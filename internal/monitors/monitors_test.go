package monitors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
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
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/rewardmodel"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/secrets"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/internal/serving/vllmtest"
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
	exec(`INSERT INTO live_scores (scorer_id, feedback_id, org_id, feedback_at, status, score)
		SELECT (SELECT id FROM live_scorers), f.id, $1, f.created_at, 'scored',
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

// A reward model's monitors against their defaults: its requests' p95
// over 100 ms breaches, and its mean live score moving by more than 0.1
// from its first week's.
func TestReadReward(t *testing.T) {
	st := monitors.Defaults()
	cases := []struct {
		name string
		w    monitors.RewardWindow
		kind string
		want string
	}{
		{"slow", monitors.RewardWindow{Calls: 30, LatencyP95: 140}, monitors.KindRewardLatency, "breached"},
		{"fast", monitors.RewardWindow{Calls: 30, LatencyP95: 100}, monitors.KindRewardLatency, "ok"},
		{"few requests", monitors.RewardWindow{Calls: 3, LatencyP95: 900}, monitors.KindRewardLatency, "waiting"},
		{"fell", monitors.RewardWindow{Live: 30, LiveMean: 0.55, RefReady: true, Reference: 40, ReferenceMean: 0.7}, monitors.KindRewardDrift, "breached"},
		{"rose", monitors.RewardWindow{Live: 30, LiveMean: 0.85, RefReady: true, Reference: 40, ReferenceMean: 0.7}, monitors.KindRewardDrift, "breached"},
		{"steady", monitors.RewardWindow{Live: 30, LiveMean: 0.75, RefReady: true, Reference: 40, ReferenceMean: 0.7}, monitors.KindRewardDrift, "ok"},
		{"first week", monitors.RewardWindow{Live: 30, LiveMean: 0.1}, monitors.KindRewardDrift, "waiting"},
		{"few scores", monitors.RewardWindow{Live: 5, LiveMean: 0.1, RefReady: true, Reference: 40, ReferenceMean: 0.7}, monitors.KindRewardDrift, "waiting"},
	}
	for _, c := range cases {
		rs := monitors.ReadReward(st, c.w)
		if len(rs) != 2 || rs[0].Kind != monitors.KindRewardLatency || rs[1].Kind != monitors.KindRewardDrift {
			t.Fatalf("readings %+v", rs)
		}
		r := rs[0]
		if c.kind == monitors.KindRewardDrift {
			r = rs[1]
		}
		got := "waiting"
		switch {
		case r.Breached:
			got = "breached"
		case r.Ready:
			got = "ok"
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s (%s)", c.name, got, c.want, r.Text)
		}
	}
	rs := monitors.ReadReward(st, monitors.RewardWindow{Calls: 30, LatencyP95: 140, Live: 30, LiveMean: 0.55, RefReady: true, Reference: 40, ReferenceMean: 0.7})
	if rs[0].Text != "p95 140 ms over the last hour (30 requests scored); the limit is 100 ms." ||
		rs[1].Text != "Mean live score 0.550 over the last 24 hours (30 scores) against 0.700 in the first week (40): −0.150; a move over 0.1 alerts." {
		t.Errorf("texts %q, %q", rs[0].Text, rs[1].Text)
	}
	st.RewardLatencyP95MS, st.RewardDrift = 0, 1
	err := st.Validate()
	if err == nil || !strings.Contains(err.Error(), "reward_latency_p95_ms") || !strings.Contains(err.Error(), "reward_drift") {
		t.Errorf("refused: %v", err)
	}
}

// A reward model deployed to a vllm_pooling target is watched on the
// requests Curate sends it: answers scored through the reward model
// service (the stand-in taking 150 ms each) put its latency p95 over
// 100 ms, and their live scores (about 0.27) have drifted from its first
// week's (0.8); an evaluation's scores in the same hours do not count for
// drift. Each breach is an alert of its own kind linking to the evidence,
// and the version's monitors are a reward model's only.
func TestRewardModelMonitors(t *testing.T) {
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
	box, err := secrets.New(strings.Repeat("k", 32))
	if err != nil {
		t.Fatal(err)
	}
	policy, err := outbound.ParsePolicy("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	admin := audit.Actor{Kind: "system", Label: "ops"}
	srv := serving.New(pool, box, &outbound.Client{Policy: policy}, "", "")
	srv.Attempts, srv.RetryDelay = 1, time.Millisecond
	reg := models.New(pool, jobs, srv, nil)
	stand := vllmtest.NewPooling(t, "support-rm", "/runs/7f3a/final", func(conv []vllmtest.Message) float64 { return -1 })
	if _, err := srv.Create(ctx, admin, org.ID, serving.NewTarget{Name: "rm-1", Kind: serving.KindVLLMPooling, BaseURL: stand.URL}); err != nil {
		t.Fatal(err)
	}
	v, err := reg.Register(ctx, admin, org.ID, models.NewVersion{Name: "support-rm", ModelID: "/runs/7f3a/final", Kind: models.KindReward})
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Deploy(ctx, admin, org.ID, v.ID, models.DeployRequest{Alias: "production", Target: "rm-1", Reason: "scores best-of-N"})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Advance(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// Served ten days; its first week's live scores were 0.8.
	exec(`UPDATE deployments SET created_at = now() - interval '10 days' WHERE id = $1`, d.ID)
	exec(`INSERT INTO reward_model_calls (org_id, version_id, purpose, latency_ms, score, created_at)
		SELECT $1, $2, 'live', 40, 0.8, now() - interval '9 days' FROM generate_series(1, 40)`, org.ID, v.ID)

	mon := monitors.New(pool)
	// Before today's traffic neither monitor has enough to judge.
	_, vs, err := mon.Check(ctx, org.ID, time.Now())
	if err != nil || len(vs) != 1 || vs[0].Kind != "reward" || len(vs[0].Readings) != 2 || vs[0].Readings[0].Ready || vs[0].Readings[1].Ready {
		t.Fatalf("before: %+v %v", vs, err)
	}

	stand.SetDelay(150 * time.Millisecond)
	rms := rewardmodel.New(pool, reg)
	m, err := rms.Resolve(ctx, org.ID, rewardmodel.Ref{Name: "support-rm", Alias: "production"})
	if err != nil {
		t.Fatal(err)
	}
	ins := make([]scorers.Input, 25)
	for i := range ins {
		ins[i] = scorers.Input{Query: "My router blinks red", Answer: fmt.Sprintf("Answer %d", i)}
	}
	if _, err := rms.Score(ctx, org.ID, m, rewardmodel.Live, ins); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO reward_model_calls (org_id, version_id, purpose, latency_ms, score)
		SELECT $1, $2, 'evaluation', 150, 0.99 FROM generate_series(1, 200)`, org.ID, v.ID)

	now := time.Now()
	_, vs, err = mon.Check(ctx, org.ID, now)
	if err != nil || len(vs) != 1 {
		t.Fatalf("check: %+v %v", vs, err)
	}
	lat, drift := vs[0].Readings[0], vs[0].Readings[1]
	if lat.Kind != monitors.KindRewardLatency || !lat.Breached || lat.Samples != 225 || lat.Value < 150 {
		t.Errorf("latency %+v", lat)
	}
	// Live scores: the logistic of the stand-in's −1, against 0.8.
	live := 1 / (1 + math.Exp(1))
	if drift.Kind != monitors.KindRewardDrift || !drift.Breached || drift.Samples != 25 || drift.Reference != 40 ||
		math.Abs(drift.Value-(live-0.8)) > 1e-9 {
		t.Errorf("drift %+v, want %v", drift, live-0.8)
	}

	al := alerts.New(pool, nil, nil, nil, mon, nil)
	res, err := al.Evaluate(ctx, org.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Opened) != len(monitors.RewardKinds) {
		t.Fatalf("opened %+v", res.Opened)
	}
	for i, a := range res.Opened {
		if a.Kind != monitors.RewardKinds[i] && a.Kind != monitors.RewardKinds[1-i] || a.DedupKey != a.Kind+":"+v.ID.String() ||
			!strings.Contains(a.Title, "support-rm 1.0.0") || alerts.Evidence(a.Details) != monitors.EvidenceURL(v.ID) {
			t.Errorf("alert %s: key %s, title %q, evidence %q", a.Kind, a.DedupKey, a.Title, alerts.Evidence(a.Details))
		}
	}

	// An admin's own limits: 200 ms and a drift of 0.6 are not breached.
	st := monitors.Defaults()
	st.RewardLatencyP95MS, st.RewardDrift = 200, 0.6
	if err := mon.SaveSettings(ctx, admin, org.ID, st); err != nil {
		t.Fatal(err)
	}
	if got, err := mon.Settings(ctx, org.ID); err != nil || got != st {
		t.Fatalf("settings %+v %v", got, err)
	}
	if res, err = al.Evaluate(ctx, org.ID, now.Add(time.Minute)); err != nil || res.Resolved != 2 {
		t.Errorf("resolved %d, %v", res.Resolved, err)
	}
}
