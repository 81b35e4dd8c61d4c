// Package alerts watches an organisation's feedback for three conditions:
// the average rating of a model falling below a threshold over a window, a
// spike of thumbs-down against the trailing baseline, and safety reports
// awaiting review. Rules are pure functions of a Snapshot; the Service's
// evaluation reads the snapshot from the database, opens an alert for each
// new condition, keeps one alert per condition while it holds (its dedup
// key), and resolves it when the condition clears. The Service also owns
// what people do with alerts (the list, dismissing, the settings and the
// webhook secret) and the webhook deliveries.
package alerts

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
)

// Kinds of alert.
const (
	KindLowRating = "low_rating"
	KindSpike     = "thumbs_down_spike"
	KindSafety    = "safety"
)

// Severities, as the banners colour them.
const (
	SeverityWarn = "warn"
	SeverityBad  = "bad"
)

// Settings are an organisation's alert rules.
type Settings struct {
	Enabled bool
	// RatingThreshold: a model whose average rating in the window is below
	// it alerts, once it has at least MinRatings ratings there.
	RatingThreshold float64
	MinRatings      int
	// Window is how far back the rules look.
	Window time.Duration
	// BaselineDays is the trailing period before the window that the
	// thumbs-down count is compared with.
	BaselineDays int
	// SpikeFactor: the window's thumbs-down count alerts when it is at
	// least this many times what the baseline rate predicts, and at least
	// SpikeMinCount.
	SpikeFactor   float64
	SpikeMinCount int
	WebhookURL    string
}

// Defaults are the settings of an organisation that has not changed them;
// the 3.5 threshold is the product specification's.
func Defaults() Settings {
	return Settings{Enabled: true, RatingThreshold: 3.5, MinRatings: 10, Window: 24 * time.Hour,
		BaselineDays: 7, SpikeFactor: 2, SpikeMinCount: 5}
}

// Validate checks settings as an admin entered them.
func (s Settings) Validate() error {
	v := &errs.Invalid{}
	if s.RatingThreshold <= 1 || s.RatingThreshold > 5 {
		v.Add("rating_threshold", "must be above 1 and at most 5")
	}
	if s.MinRatings < 1 || s.MinRatings > 100000 {
		v.Add("min_ratings", "must be 1 to 100000")
	}
	if h := s.Window.Hours(); h < 1 || h > 720 || s.Window%time.Hour != 0 {
		v.Add("window_hours", "must be a whole number of hours, 1 to 720")
	}
	if s.BaselineDays < 1 || s.BaselineDays > 90 {
		v.Add("baseline_days", "must be 1 to 90")
	}
	if s.SpikeFactor <= 1 || s.SpikeFactor > 100 {
		v.Add("spike_factor", "must be above 1 and at most 100")
	}
	if s.SpikeMinCount < 1 || s.SpikeMinCount > 100000 {
		v.Add("spike_min_count", "must be 1 to 100000")
	}
	if msg := checkURL(s.WebhookURL); msg != "" {
		v.Add("webhook_url", "%s", msg)
	}
	return v.Err()
}

func checkURL(raw string) string {
	if raw == "" {
		return ""
	}
	if len(raw) > 2000 {
		return "must be at most 2000 characters"
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "must be an http:// or https:// address"
	}
	if u.User != nil {
		return "must not carry a user name or password"
	}
	return ""
}

// ModelRatings are one model's ratings in the window: a registered
// version's, whatever names its feedback gave it (the adapter's served
// names, its model id), or else a model's as its feedback named it.
type ModelRatings struct {
	// Model is the version as registered ("support 1.1.0"), or the name
	// feedback gave a model Curate does not know.
	Model string
	// VersionID is the registered version's id, "" for a model Curate does
	// not know; Models are the names its feedback gave it.
	VersionID string
	Models    []string
	Count     int
	Sum       int
}

// key is what keeps one alert per model: its registered version where
// there is one, so that one version served under two names is one alert.
func (m ModelRatings) key() string {
	if m.VersionID != "" {
		return KindLowRating + ":version:" + m.VersionID
	}
	return KindLowRating + ":" + m.Model
}

// Snapshot is what the rules look at for one organisation.
type Snapshot struct {
	Ratings []ModelRatings
	// ThumbsDown counts thumbs-down in the window and in the baseline
	// period before it; BaselineFeedback is all feedback in that period.
	ThumbsDown         int
	BaselineThumbsDown int
	BaselineFeedback   int
	// SafetyReports are unreviewed items in the window with a safety
	// score of 2 or less or the tag "safety".
	SafetyReports int
	// Since and Until bound the window; an alert's details keep them so
	// its link shows exactly the items it counted.
	Since, Until time.Time
}

// Condition is a rule that fires: the alert it opens, or keeps open.
type Condition struct {
	Kind     string
	Severity string
	Key      string // the dedup key: one open alert per key
	Title    string
	Message  string
	Details  map[string]any
}

// Evaluate applies the rules to a snapshot and returns the conditions that
// hold, in a stable order.
func Evaluate(s Settings, snap Snapshot) []Condition {
	if !s.Enabled {
		return nil
	}
	var out []Condition
	window := windowText(s.Window)
	for _, m := range snap.Ratings {
		if m.Count < s.MinRatings || m.Count == 0 {
			continue
		}
		avg := float64(m.Sum) / float64(m.Count)
		if avg >= s.RatingThreshold {
			continue
		}
		sev := SeverityWarn
		if avg < s.RatingThreshold-1 {
			sev = SeverityBad
		}
		details := map[string]any{"model": m.Model, "average": round2(avg), "ratings": m.Count, "threshold": s.RatingThreshold}
		if m.VersionID != "" {
			// The queue filters on one name: the first its feedback gave.
			details["version_id"], details["models"] = m.VersionID, m.Models
			if len(m.Models) > 0 {
				details["model"] = m.Models[0]
			}
		}
		out = append(out, Condition{
			Kind: KindLowRating, Severity: sev, Key: m.key(),
			Title:   "Low ratings for " + modelName(m.Model),
			Message: fmt.Sprintf("average %.2f over %d ratings in the last %s, below %.2f.", avg, m.Count, window, s.RatingThreshold),
			Details: details,
		})
	}
	if spike, expected := Spike(s, snap); spike {
		out = append(out, Condition{
			Kind: KindSpike, Severity: SeverityWarn, Key: KindSpike,
			Title: "Thumbs-down spike",
			Message: fmt.Sprintf("%d thumbs-down in the last %s against %.1f expected from the previous %d days.",
				snap.ThumbsDown, window, expected, s.BaselineDays),
			Details: map[string]any{"thumbs_down": snap.ThumbsDown, "expected": round2(expected),
				"baseline_thumbs_down": snap.BaselineThumbsDown, "factor": s.SpikeFactor},
		})
	}
	if snap.SafetyReports > 0 {
		out = append(out, Condition{
			Kind: KindSafety, Severity: SeverityBad, Key: KindSafety,
			Title:   "Safety reports",
			Message: fmt.Sprintf("%d safety %s in the last %s %s review.", snap.SafetyReports, plural(snap.SafetyReports, "report", "reports"), window, plural(snap.SafetyReports, "awaits", "await")),
			Details: map[string]any{"reports": snap.SafetyReports},
		})
	}
	if !snap.Until.IsZero() {
		for _, c := range out {
			c.Details["since"] = snap.Since.UTC().Format(time.RFC3339Nano)
			c.Details["until"] = snap.Until.UTC().Format(time.RFC3339Nano)
		}
	}
	return out
}

// QueueFilter is the feedback queue's filter that shows what an alert of
// the kind counted, read from its stored details: the same conditions and,
// where the details keep it, the same window. Duplicates are shown because
// the rules count them.
func QueueFilter(kind string, details []byte) url.Values {
	var d struct {
		Model        *string `json:"model"`
		Since, Until string
	}
	// Details written by this package always parse; an unreadable one
	// leaves the kind's conditions without a window.
	_ = json.Unmarshal(details, &d)
	f := feedback.Filter{WithDuplicates: true}
	switch kind {
	case KindLowRating:
		f.RatingMin = 1 // rated at all
		if d.Model != nil {
			f.Model = *d.Model
		}
	case KindSpike:
		f.Type = "thumbs_down"
	case KindSafety:
		f.Status, f.Safety = "pending", true
	default:
		return nil
	}
	f.From, _ = time.Parse(time.RFC3339, d.Since)
	f.To, _ = time.Parse(time.RFC3339, d.Until)
	return f.Values()
}

// Spike reports whether the window's thumbs-down count is a spike, and the
// count the baseline predicts for a window: the baseline's thumbs-down per
// hour times the window's hours. Without any feedback in the baseline
// there is nothing to compare with, so nothing is a spike.
func Spike(s Settings, snap Snapshot) (bool, float64) {
	if snap.BaselineFeedback == 0 {
		return false, 0
	}
	baseline := time.Duration(s.BaselineDays) * 24 * time.Hour
	expected := float64(snap.BaselineThumbsDown) * s.Window.Hours() / baseline.Hours()
	return snap.ThumbsDown >= s.SpikeMinCount && float64(snap.ThumbsDown) >= s.SpikeFactor*expected, expected
}

func modelName(m string) string {
	if m == "" {
		return "feedback without a model"
	}
	return m
}

func windowText(d time.Duration) string {
	h := int(d.Hours())
	switch {
	case h == 1:
		return "hour"
	case h%24 == 0 && h/24 == 1:
		return "24 hours"
	case h%24 == 0:
		return fmt.Sprintf("%d days", h/24)
	}
	return fmt.Sprintf("%d hours", h)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func round2(f float64) float64 {
	return float64(int64(f*100+0.5)) / 100
}

// Plan compares the open alerts' keys with the conditions that hold: the
// conditions to open, the conditions that refresh an open alert (by key),
// and the keys of open alerts to resolve.
func Plan(open []string, holding []Condition) (toOpen, toRefresh []Condition, toResolve []string) {
	isOpen := make(map[string]bool, len(open))
	for _, k := range open {
		isOpen[k] = true
	}
	holds := make(map[string]bool, len(holding))
	for _, c := range holding {
		holds[c.Key] = true
		if isOpen[c.Key] {
			toRefresh = append(toRefresh, c)
		} else {
			toOpen = append(toOpen, c)
		}
	}
	for _, k := range open {
		if !holds[k] {
			toResolve = append(toResolve, k)
		}
	}
	return toOpen, toRefresh, toResolve
}
