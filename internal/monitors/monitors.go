// Package monitors watches every served version in production: its latency
// p95 over a threshold, its feedback rate dropping against the same hours
// of the previous week, its error rate (feedback that reports error: true)
// over a threshold, and the distribution of its live scores shifting from
// its first week (a two-sample Kolmogorov–Smirnov test, or the population
// stability index). A reward model in production (a version of kind
// reward) is watched on its own requests instead: their latency p95 over a
// threshold (seed 001's 100 ms), and the mean of its live scores drifting
// from that of its first week. The alert rules' periodic evaluation asks for the
// conditions (Conditions): a breach is an alert with a link to its
// evidence, the monitors page, and a running rollout whose treatment has
// an open one rolls back as on a guardrail's breach.
package monitors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/stats"
)

// Kinds of monitor, as the alerts name them.
const (
	KindLatency      = "monitor_latency"
	KindFeedbackRate = "monitor_feedback_rate"
	KindErrorRate    = "monitor_error_rate"
	KindScoreShift   = "monitor_score_shift"

	KindRewardLatency = "monitor_reward_latency"
	KindRewardDrift   = "monitor_reward_drift"
)

// Kinds lists an answering model's monitors in the order a page shows
// them; RewardKinds a reward model's.
var (
	Kinds       = []string{KindLatency, KindFeedbackRate, KindErrorRate, KindScoreShift}
	RewardKinds = []string{KindRewardLatency, KindRewardDrift}
)

// Shift tests.
const (
	ShiftKS  = "ks"
	ShiftPSI = "psi"
)

// Settings are an organisation's monitors.
type Settings struct {
	Enabled bool `json:"enabled"`
	// WindowHours is the window latency, errors and the feedback rate are
	// read over, ending now; MinSamples the fewest items a monitor judges.
	WindowHours int `json:"window_hours"`
	MinSamples  int `json:"min_samples"`
	// LatencyP95MS: the window's latency p95 above it breaches.
	LatencyP95MS int `json:"latency_p95_ms"`
	// FeedbackDrop: the window's feedback below (1 − it) times the same
	// hours of the previous week's breaches.
	FeedbackDrop float64 `json:"feedback_drop"`
	// ErrorRate: the window's share of feedback reporting an error above it
	// breaches.
	ErrorRate float64 `json:"error_rate"`
	// ShiftTest compares the live scores of the last ShiftWindowHours with
	// those of the version's first week: ks breaches below ShiftPValue,
	// psi above ShiftPSI.
	ShiftTest        string  `json:"shift_test"`
	ShiftWindowHours int     `json:"shift_window_hours"`
	ShiftPValue      float64 `json:"shift_p_value"`
	ShiftPSI         float64 `json:"shift_psi"`
	// RewardLatencyP95MS: a reward model's requests of the window with a
	// latency p95 above it breach. RewardDrift: the mean of its live
	// scores in the shift window further than it (on 0–1) from the mean
	// of its first week breaches.
	RewardLatencyP95MS int     `json:"reward_latency_p95_ms"`
	RewardDrift        float64 `json:"reward_drift"`
}

// Defaults are the design's: latency over 2 s, a feedback rate drop over
// 20%, an error rate over 1%, and a score distribution shift; a reward
// model's latency over seed 001's 100 ms and its mean score moving by
// more than 0.1.
func Defaults() Settings {
	return Settings{Enabled: true, WindowHours: 1, MinSamples: 20, LatencyP95MS: 2000, FeedbackDrop: 0.2, ErrorRate: 0.01,
		ShiftTest: ShiftKS, ShiftWindowHours: 24, ShiftPValue: 0.01, ShiftPSI: 0.2, RewardLatencyP95MS: 100, RewardDrift: 0.1}
}

// Validate checks settings as an admin gives them.
func (s Settings) Validate() error {
	v := &errs.Invalid{}
	if s.WindowHours < 1 || s.WindowHours > 168 {
		v.Add("window_hours", "must be 1 to 168 hours")
	}
	if s.MinSamples < 1 || s.MinSamples > 100000 {
		v.Add("min_samples", "must be 1 to 100000")
	}
	if s.LatencyP95MS < 1 || s.LatencyP95MS > 3_600_000 {
		v.Add("latency_p95_ms", "must be 1 to 3600000 milliseconds")
	}
	if !(s.FeedbackDrop > 0 && s.FeedbackDrop < 1) {
		v.Add("feedback_drop", "must lie between 0 and 1 (0.2 is a 20%% drop)")
	}
	if !(s.ErrorRate > 0 && s.ErrorRate < 1) {
		v.Add("error_rate", "must lie between 0 and 1 (0.01 is 1%%)")
	}
	if s.ShiftTest != ShiftKS && s.ShiftTest != ShiftPSI {
		v.Add("shift_test", "must be ks or psi")
	}
	if s.ShiftWindowHours < 1 || s.ShiftWindowHours > 720 {
		v.Add("shift_window_hours", "must be 1 to 720 hours")
	}
	if !(s.ShiftPValue > 0 && s.ShiftPValue < 1) {
		v.Add("shift_p_value", "must lie between 0 and 1")
	}
	if !(s.ShiftPSI > 0 && s.ShiftPSI <= 100) {
		v.Add("shift_psi", "must be above 0 and at most 100")
	}
	if s.RewardLatencyP95MS < 1 || s.RewardLatencyP95MS > 3_600_000 {
		v.Add("reward_latency_p95_ms", "must be 1 to 3600000 milliseconds")
	}
	if !(s.RewardDrift > 0 && s.RewardDrift < 1) {
		v.Add("reward_drift", "must lie between 0 and 1 (0.1 is a tenth of the score's range)")
	}
	return v.Err()
}

// Reading is one monitor of one version now: the value against its
// threshold over the samples it read, or why it did not judge (Ready
// false). Text says it in words.
type Reading struct {
	Kind      string  `json:"kind"`
	Ready     bool    `json:"ready"`
	Breached  bool    `json:"breached"`
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Samples   int     `json:"samples"`
	Text      string  `json:"text"`
	// Shift's numbers: the KS statistic and p-value, or the PSI, and the
	// reference sample's size.
	D         *float64 `json:"d,omitempty"`
	PValue    *float64 `json:"p_value,omitempty"`
	Reference int      `json:"reference,omitempty"`
}

// Window is what the monitors read of one version: its feedback in the
// window and in the same hours a week before, and its live scores in the
// shift window and in its first week (nil while that week lasts).
type Window struct {
	Feedback, WithLatency, Errors int
	LatencyP95                    float64
	BaselineFeedback              int
	Scores, Reference             []float64
}

// RewardWindow is what the monitors read of a reward model: its requests
// in the window and their latency p95, its live scores in the shift
// window and their mean, and those of its first week (RefReady false
// while that week lasts).
type RewardWindow struct {
	Calls         int
	LatencyP95    float64
	Live          int
	LiveMean      float64
	RefReady      bool
	Reference     int
	ReferenceMean float64
}

// ReadReward applies a reward model's monitors to its window.
func ReadReward(s Settings, w RewardWindow) []Reading {
	window := hoursText(s.WindowHours)
	lat := Reading{Kind: KindRewardLatency, Threshold: float64(s.RewardLatencyP95MS), Samples: w.Calls, Value: w.LatencyP95}
	if lat.Ready = w.Calls >= s.MinSamples; lat.Ready {
		lat.Breached = w.LatencyP95 > lat.Threshold
		lat.Text = fmt.Sprintf("p95 %s over the last %s (%d requests scored); the limit is %s.", millis(w.LatencyP95), window,
			w.Calls, millis(lat.Threshold))
	} else {
		lat.Text = fmt.Sprintf("%d requests in the last %s; at least %d are needed.", w.Calls, window, s.MinSamples)
	}
	drift := Reading{Kind: KindRewardDrift, Threshold: s.RewardDrift, Samples: w.Live, Reference: w.Reference}
	shiftWindow := hoursText(s.ShiftWindowHours)
	switch {
	case !w.RefReady:
		drift.Text = "The reward model's first week is not over: its live scores are the baseline."
	case w.Live < s.MinSamples || w.Reference < s.MinSamples:
		drift.Text = fmt.Sprintf("%d live scores in the first week and %d in the last %s; at least %d of each are needed.",
			w.Reference, w.Live, shiftWindow, s.MinSamples)
	default:
		drift.Ready = true
		drift.Value = w.LiveMean - w.ReferenceMean
		drift.Breached = math.Abs(drift.Value) > s.RewardDrift
		drift.Text = fmt.Sprintf("Mean live score %.3f over the last %s (%d scores) against %.3f in the first week (%d): %s; a move over %g alerts.",
			w.LiveMean, shiftWindow, w.Live, w.ReferenceMean, w.Reference, signed(drift.Value), s.RewardDrift)
	}
	return []Reading{lat, drift}
}

// Read applies the monitors to a version's window.
func Read(s Settings, w Window) []Reading {
	window := hoursText(s.WindowHours)
	out := make([]Reading, 0, len(Kinds))
	lat := Reading{Kind: KindLatency, Threshold: float64(s.LatencyP95MS), Samples: w.WithLatency, Value: w.LatencyP95}
	if lat.Ready = w.WithLatency >= s.MinSamples; lat.Ready {
		lat.Breached = w.LatencyP95 > lat.Threshold
		lat.Text = fmt.Sprintf("p95 %s over the last %s (%d answers reporting one); the limit is %s.", seconds(w.LatencyP95), window,
			w.WithLatency, seconds(lat.Threshold))
	} else {
		lat.Text = fmt.Sprintf("%d answers reported a latency in the last %s; at least %d are needed.", w.WithLatency, window, s.MinSamples)
	}
	rate := Reading{Kind: KindFeedbackRate, Threshold: s.FeedbackDrop, Samples: w.Feedback}
	if rate.Ready = w.BaselineFeedback >= s.MinSamples; rate.Ready {
		rate.Value = 1 - float64(w.Feedback)/float64(w.BaselineFeedback)
		rate.Breached = rate.Value > s.FeedbackDrop
		rate.Text = fmt.Sprintf("%d feedback items in the last %s against %d in the same hours a week ago: %s; a drop over %s alerts.",
			w.Feedback, window, w.BaselineFeedback, change(-rate.Value), pct(s.FeedbackDrop))
	} else {
		rate.Text = fmt.Sprintf("%d feedback items in the same hours a week ago; at least %d are needed to compare.", w.BaselineFeedback, s.MinSamples)
	}
	errRate := Reading{Kind: KindErrorRate, Threshold: s.ErrorRate, Samples: w.Feedback}
	if errRate.Ready = w.Feedback >= s.MinSamples; errRate.Ready {
		errRate.Value = float64(w.Errors) / float64(w.Feedback)
		errRate.Breached = errRate.Value > s.ErrorRate
		errRate.Text = fmt.Sprintf("%d of %d feedback items in the last %s reported an error (%s); the limit is %s.", w.Errors, w.Feedback,
			window, pct(errRate.Value), pct(s.ErrorRate))
	} else {
		errRate.Text = fmt.Sprintf("%d feedback items in the last %s; at least %d are needed.", w.Feedback, window, s.MinSamples)
	}
	out = append(out, lat, rate, errRate, shift(s, w))
	return out
}

// shift compares the live scores of the shift window with the version's
// first week.
func shift(s Settings, w Window) Reading {
	r := Reading{Kind: KindScoreShift, Samples: len(w.Scores), Reference: len(w.Reference)}
	window := hoursText(s.ShiftWindowHours)
	switch {
	case w.Reference == nil:
		r.Text = "The version's first week is not over: its scores are the reference."
		return r
	case len(w.Reference) < s.MinSamples || len(w.Scores) < s.MinSamples:
		r.Text = fmt.Sprintf("%d live scores in the first week and %d in the last %s; at least %d of each are needed.",
			len(w.Reference), len(w.Scores), window, s.MinSamples)
		return r
	}
	if s.ShiftTest == ShiftPSI {
		psi, err := stats.PSI(w.Reference, w.Scores, stats.EqualBins(0, 1, 10))
		if err != nil {
			r.Text = "The scores could not be compared: " + err.Error() + "."
			return r
		}
		r.Ready, r.Value, r.Threshold, r.Breached = true, psi, s.ShiftPSI, psi > s.ShiftPSI
		r.Text = fmt.Sprintf("Population stability index %.3f of the last %s's %d live scores against the first week's %d; above %.2f alerts.",
			psi, window, len(w.Scores), len(w.Reference), s.ShiftPSI)
		return r
	}
	ks, err := stats.KS2Sample(w.Reference, w.Scores)
	if err != nil {
		r.Text = "The scores could not be compared: " + err.Error() + "."
		return r
	}
	r.Ready, r.Value, r.Threshold, r.Breached = true, ks.PValue, s.ShiftPValue, ks.PValue < s.ShiftPValue
	r.D, r.PValue = &ks.D, &ks.PValue
	r.Text = fmt.Sprintf("Kolmogorov–Smirnov D = %.3f (p %s) between the last %s's %d live scores and the first week's %d; p below %g alerts.",
		ks.D, pText(ks.PValue), window, len(w.Scores), len(w.Reference), s.ShiftPValue)
	return r
}

func seconds(ms float64) string {
	return strconv.FormatFloat(math.Round(ms/10)/100, 'f', -1, 64) + " s"
}

func millis(ms float64) string {
	return strconv.FormatFloat(math.Round(ms*10)/10, 'f', -1, 64) + " ms"
}

func signed(x float64) string {
	if x >= 0 {
		return "+" + strconv.FormatFloat(x, 'f', 3, 64)
	}
	return "−" + strconv.FormatFloat(-x, 'f', 3, 64)
}

func pct(x float64) string { return strconv.FormatFloat(math.Round(x*1000)/10, 'f', -1, 64) + "%" }

func change(x float64) string {
	if x >= 0 {
		return "+" + pct(x)
	}
	return "−" + pct(-x)
}

func pText(p float64) string {
	if p < 0.0001 {
		return "< 0.0001"
	}
	return "= " + strconv.FormatFloat(p, 'f', 4, 64)
}

func hoursText(h int) string {
	switch {
	case h == 1:
		return "hour"
	case h%24 == 0 && h > 24:
		return fmt.Sprintf("%d days", h/24)
	}
	return fmt.Sprintf("%d hours", h)
}

// Service reads the monitors and keeps their settings.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds the production monitors on pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// Settings returns an organisation's monitor settings, the defaults until
// an admin changes them.
func (s *Service) Settings(ctx context.Context, orgID uuid.UUID) (Settings, error) {
	return load(ctx, db.New(s.Pool), orgID)
}

func load(ctx context.Context, q *db.Queries, orgID uuid.UUID) (Settings, error) {
	r, err := q.MonitorSettingsGet(ctx, orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Defaults(), nil
	}
	if err != nil {
		return Settings{}, err
	}
	return Settings{Enabled: r.Enabled, WindowHours: int(r.WindowHours), MinSamples: int(r.MinSamples), LatencyP95MS: int(r.LatencyP95Ms),
		FeedbackDrop: r.FeedbackDrop, ErrorRate: r.ErrorRate, ShiftTest: r.ShiftTest, ShiftWindowHours: int(r.ShiftWindowHours),
		ShiftPValue: r.ShiftPValue, ShiftPSI: r.ShiftPsi, RewardLatencyP95MS: int(r.RewardLatencyP95Ms), RewardDrift: r.RewardDrift}, nil
}

// SaveSettings validates and stores an organisation's monitor settings,
// audited; invalid settings change nothing.
func (s *Service) SaveSettings(ctx context.Context, actor audit.Actor, orgID uuid.UUID, st Settings) error {
	if err := st.Validate(); err != nil {
		return err
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.MonitorSettingsInsertOrUpdate(ctx, db.MonitorSettingsInsertOrUpdateParams{OrgID: orgID, Enabled: st.Enabled,
			WindowHours: int32(st.WindowHours), MinSamples: int32(st.MinSamples), LatencyP95Ms: int32(st.LatencyP95MS),
			FeedbackDrop: st.FeedbackDrop, ErrorRate: st.ErrorRate, ShiftTest: st.ShiftTest, ShiftWindowHours: int32(st.ShiftWindowHours),
			ShiftPValue: st.ShiftPValue, ShiftPsi: st.ShiftPSI, RewardLatencyP95Ms: int32(st.RewardLatencyP95MS),
			RewardDrift: st.RewardDrift}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "monitors.settings", TargetType: "monitor_settings",
			TargetID: orgID.String(), Details: map[string]any{"settings": st}})
	})
}

// Version is one served version's monitors now.
type Version struct {
	ID          uuid.UUID `json:"version_id"`
	Model       string    `json:"model"`
	Version     string    `json:"version"`
	Kind        string    `json:"kind"` // full, lora or reward: a reward model has its own monitors
	FirstServed time.Time `json:"first_served"`
	Since       time.Time `json:"since"`
	Until       time.Time `json:"until"`
	Readings    []Reading `json:"monitors"`
}

// Check reads every served version's monitors at now.
func (s *Service) Check(ctx context.Context, orgID uuid.UUID, now time.Time) (Settings, []Version, error) {
	q := db.New(s.Pool)
	st, err := load(ctx, q, orgID)
	if err != nil {
		return st, nil, err
	}
	vs, err := check(ctx, q, orgID, st, now)
	return st, vs, err
}

// rewardKind is a reward model's version kind (models.KindReward).
const rewardKind = "reward"

// week is a version's reference period for its scores and the feedback
// rate's lag.
const week = 7 * 24 * time.Hour

func check(ctx context.Context, q *db.Queries, orgID uuid.UUID, st Settings, now time.Time) ([]Version, error) {
	served, err := q.MonitorListServedVersions(ctx, orgID)
	if err != nil {
		return nil, err
	}
	since := now.Add(-time.Duration(st.WindowHours) * time.Hour)
	out := make([]Version, 0, len(served))
	for _, v := range served {
		if v.Kind == rewardKind {
			w, err := rewardWindow(ctx, q, orgID, st, v.ID, v.FirstServed, now)
			if err != nil {
				return nil, err
			}
			out = append(out, Version{ID: v.ID, Model: v.ModelName, Version: v.Version, Kind: v.Kind, FirstServed: v.FirstServed,
				Since: since, Until: now, Readings: ReadReward(st, w)})
			continue
		}
		p := db.MonitorGetWindowParams{OrgID: orgID, Since: since, Until: now, Names: v.Names, VersionID: v.ID}
		cur, err := q.MonitorGetWindow(ctx, p)
		if err != nil {
			return nil, err
		}
		p.Since, p.Until = since.Add(-week), now.Add(-week)
		base, err := q.MonitorGetWindow(ctx, p)
		if err != nil {
			return nil, err
		}
		w := Window{Feedback: int(cur.Feedback), WithLatency: int(cur.WithLatency), Errors: int(cur.Errors), LatencyP95: cur.LatencyP95,
			BaselineFeedback: int(base.Feedback)}
		scores := db.MonitorListScoresParams{OrgID: orgID, Names: v.Names, VersionID: v.ID, RowLimit: stats.MaxKSValues,
			Since: now.Add(-time.Duration(st.ShiftWindowHours) * time.Hour), Until: now}
		if w.Scores, err = q.MonitorListScores(ctx, scores); err != nil {
			return nil, err
		}
		if end := v.FirstServed.Add(week); !now.Before(end) {
			scores.Since, scores.Until = v.FirstServed, end
			if w.Reference, err = q.MonitorListScores(ctx, scores); err != nil {
				return nil, err
			}
			if w.Reference == nil {
				w.Reference = []float64{}
			}
		}
		out = append(out, Version{ID: v.ID, Model: v.ModelName, Version: v.Version, Kind: v.Kind, FirstServed: v.FirstServed,
			Since: since, Until: now, Readings: Read(st, w)})
	}
	return out, nil
}

// rewardWindow reads a reward model's requests: those of the window for
// latency, and the live scores of the shift window and of its first week.
func rewardWindow(ctx context.Context, q *db.Queries, orgID uuid.UUID, st Settings, id uuid.UUID, firstServed, now time.Time) (RewardWindow, error) {
	p := db.MonitorGetRewardCallsParams{OrgID: orgID, VersionID: id, Since: now.Add(-time.Duration(st.WindowHours) * time.Hour), Until: now}
	cur, err := q.MonitorGetRewardCalls(ctx, p)
	if err != nil {
		return RewardWindow{}, err
	}
	w := RewardWindow{Calls: int(cur.Calls), LatencyP95: cur.LatencyP95}
	p.Since = now.Add(-time.Duration(st.ShiftWindowHours) * time.Hour)
	if cur, err = q.MonitorGetRewardCalls(ctx, p); err != nil {
		return RewardWindow{}, err
	}
	w.Live, w.LiveMean = int(cur.LiveScored), cur.LiveMean
	if end := firstServed.Add(week); !now.Before(end) {
		p.Since, p.Until = firstServed, end
		ref, err := q.MonitorGetRewardCalls(ctx, p)
		if err != nil {
			return RewardWindow{}, err
		}
		w.RefReady, w.Reference, w.ReferenceMean = true, int(ref.LiveScored), ref.LiveMean
	}
	return w, nil
}

// EvidenceURL is the page that shows a version's monitors.
func EvidenceURL(version uuid.UUID) string {
	return "/monitors?" + url.Values{"version": {version.String()}}.Encode()
}

// ConditionsTx are the monitors' breaches as alert conditions, one per
// version and monitor, for the alert rules' evaluation (alerts.Service's
// Monitors), read in its transaction.
func (s *Service) ConditionsTx(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, now time.Time) ([]alerts.Condition, error) {
	q := db.New(tx)
	st, err := load(ctx, q, orgID)
	if err != nil || !st.Enabled {
		return nil, err
	}
	versions, err := check(ctx, q, orgID, st, now)
	if err != nil {
		return nil, err
	}
	var out []alerts.Condition
	for _, v := range versions {
		for _, r := range v.Readings {
			if !r.Breached {
				continue
			}
			sev := alerts.SeverityWarn
			if r.Kind == KindErrorRate {
				sev = alerts.SeverityBad
			}
			name := v.Model + " " + v.Version
			out = append(out, alerts.Condition{Kind: r.Kind, Severity: sev, Key: r.Kind + ":" + v.ID.String(),
				Title:   titles[r.Kind] + " of " + name,
				Message: r.Text,
				Details: map[string]any{"version_id": v.ID.String(), "model": v.Model, "version": v.Version, "value": r.Value,
					"threshold": r.Threshold, "samples": r.Samples, "evidence": EvidenceURL(v.ID),
					"since": v.Since.UTC().Format(time.RFC3339Nano), "until": v.Until.UTC().Format(time.RFC3339Nano)}})
		}
	}
	return out, nil
}

// titles name each monitor's breach.
var titles = map[string]string{
	KindLatency:      "Latency p95 over its limit",
	KindFeedbackRate: "Feedback rate dropped",
	KindErrorRate:    "Error rate over its limit",
	KindScoreShift:   "Live score distribution shifted",

	KindRewardLatency: "Reward model latency p95 over its limit",
	KindRewardDrift:   "Reward model's mean score drifted",
}
