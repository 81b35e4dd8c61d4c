package alerts

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/curate/curate/internal/errs"
)

func TestEvaluate(t *testing.T) {
	def := Defaults() // threshold 3.5, at least 10 ratings, 24 h window, 7-day baseline, factor 2, at least 5
	factor3 := def
	factor3.SpikeFactor = 3
	off := def
	off.Enabled = false
	week := func(snap Snapshot) Snapshot { snap.BaselineFeedback = 100; return snap }

	tests := []struct {
		name     string
		settings Settings
		snap     Snapshot
		want     []string // "key severity"
		message  string   // of the first condition, when set
	}{
		{"10 ratings averaging 3.2 alert", def, Snapshot{Ratings: []ModelRatings{{Model: "m1", Count: 10, Sum: 32}}},
			[]string{"low_rating:m1 warn"}, "average 3.20 over 10 ratings in the last 24 hours, below 3.50."},
		{"an average of exactly 3.5 is not below", def, Snapshot{Ratings: []ModelRatings{{Model: "m1", Count: 10, Sum: 35}}}, nil, ""},
		{"9 ratings are too few to judge", def, Snapshot{Ratings: []ModelRatings{{Model: "m1", Count: 9, Sum: 18}}}, nil, ""},
		{"more than a point below is bad", def, Snapshot{Ratings: []ModelRatings{{Model: "m1", Count: 12, Sum: 24}, {Model: "m2", Count: 20, Sum: 90}}},
			[]string{"low_rating:m1 bad"}, "average 2.00 over 12 ratings in the last 24 hours, below 3.50."},
		// Baseline: 14 thumbs-down in 7 days = 2 a day, so 2 expected in 24 h;
		// factor 2 asks for 4, the minimum count for 5.
		{"5 against 2 expected is a spike", def, week(Snapshot{ThumbsDown: 5, BaselineThumbsDown: 14}),
			[]string{"thumbs_down_spike warn"}, "5 thumbs-down in the last 24 hours against 2.0 expected from the previous 7 days."},
		{"4 is twice the baseline but under the minimum count", def, week(Snapshot{ThumbsDown: 4, BaselineThumbsDown: 14}), nil, ""},
		{"factor 3 needs 6", factor3, week(Snapshot{ThumbsDown: 5, BaselineThumbsDown: 14}), nil, ""},
		{"factor 3, 6 is a spike", factor3, week(Snapshot{ThumbsDown: 6, BaselineThumbsDown: 14}), []string{"thumbs_down_spike warn"}, ""},
		{"no baseline, no spike", def, Snapshot{ThumbsDown: 50}, nil, ""},
		{"a quiet baseline makes any 5 a spike", def, week(Snapshot{ThumbsDown: 5}), []string{"thumbs_down_spike warn"}, ""},
		{"one safety report", def, Snapshot{SafetyReports: 1}, []string{"safety bad"}, "1 safety report in the last 24 hours awaits review."},
		{"everything at once, in order", def, week(Snapshot{Ratings: []ModelRatings{{Model: "", Count: 10, Sum: 10}}, ThumbsDown: 9, BaselineThumbsDown: 7, SafetyReports: 3}),
			[]string{"low_rating: bad", "thumbs_down_spike warn", "safety bad"}, ""},
		{"a version served under two names is one alert, keyed on the version", def, Snapshot{Ratings: []ModelRatings{{Model: "assist 1.0.0",
			VersionID: "0b6c", Models: []string{"assist-1.0.0-545e043d", "assist-1.0.0-779206ae"}, Count: 10, Sum: 20}}},
			[]string{"low_rating:version:0b6c bad"}, ""},
		{"disabled", off, Snapshot{SafetyReports: 3, Ratings: []ModelRatings{{Model: "m1", Count: 10, Sum: 10}}}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Evaluate(tt.settings, tt.snap)
			var keys []string
			for _, c := range got {
				keys = append(keys, c.Key+" "+c.Severity)
			}
			if !reflect.DeepEqual(keys, tt.want) {
				t.Fatalf("conditions %v, want %v", keys, tt.want)
			}
			if tt.message != "" && got[0].Message != tt.message {
				t.Errorf("message %q, want %q", got[0].Message, tt.message)
			}
		})
	}
}

func TestSpikeExpectation(t *testing.T) {
	// 6-hour window against a 3-day baseline with 36 thumbs-down:
	// 36 / 72 h = 0.5 an hour, so 3 expected in 6 hours.
	s := Defaults()
	s.Window, s.BaselineDays = 6*time.Hour, 3
	spike, expected := Spike(s, Snapshot{ThumbsDown: 6, BaselineThumbsDown: 36, BaselineFeedback: 40})
	if expected != 3 || !spike {
		t.Fatalf("spike %v, expected %v; want true, 3", spike, expected)
	}
	if spike, _ := Spike(s, Snapshot{ThumbsDown: 5, BaselineThumbsDown: 36, BaselineFeedback: 40}); spike {
		t.Fatal("5 against 3 expected with factor 2 is not a spike")
	}
}

func TestPlan(t *testing.T) {
	holding := []Condition{{Key: "a"}, {Key: "c"}}
	toOpen, toRefresh, toResolve := Plan([]string{"a", "b"}, holding)
	if len(toOpen) != 1 || toOpen[0].Key != "c" {
		t.Errorf("to open %v, want c", toOpen)
	}
	if len(toRefresh) != 1 || toRefresh[0].Key != "a" {
		t.Errorf("to refresh %v, want a", toRefresh)
	}
	if !reflect.DeepEqual(toResolve, []string{"b"}) {
		t.Errorf("to resolve %v, want b", toResolve)
	}
}

func TestValidate(t *testing.T) {
	ok := Defaults()
	ok.WebhookURL = "https://hooks.example.com/curate"
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults with an https URL: %v", err)
	}
	tests := []struct {
		name  string
		edit  func(*Settings)
		field string
	}{
		{"ftp URL", func(s *Settings) { s.WebhookURL = "ftp://example.com/x" }, "webhook_url"},
		{"URL without host", func(s *Settings) { s.WebhookURL = "https://" }, "webhook_url"},
		{"URL with credentials", func(s *Settings) { s.WebhookURL = "https://u:p@example.com/" }, "webhook_url"},
		{"threshold above 5", func(s *Settings) { s.RatingThreshold = 5.5 }, "rating_threshold"},
		{"window of 30 minutes", func(s *Settings) { s.Window = 30 * time.Minute }, "window_hours"},
		{"factor of 1", func(s *Settings) { s.SpikeFactor = 1 }, "spike_factor"},
		{"no baseline", func(s *Settings) { s.BaselineDays = 0 }, "baseline_days"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Defaults()
			tt.edit(&s)
			var invalid *errs.Invalid
			if err := s.Validate(); !errors.As(err, &invalid) || invalid.ByField()[tt.field] == "" {
				t.Fatalf("error %v, want one about %s", err, tt.field)
			}
		})
	}
}

// An alert's link filters the queue to what its rule counted, in the
// window its details keep.
func TestQueueFilter(t *testing.T) {
	win := `"since":"2026-03-01T09:30:00Z","until":"2026-03-02T09:30:00Z"`
	for _, c := range []struct {
		kind, details, want string
	}{
		{KindLowRating, `{"model":"support-v2",` + win + `}`, "duplicates=show&model=support-v2&rating_min=1&since=2026-03-01T09%3A30%3A00Z&until=2026-03-02T09%3A30%3A00Z"},
		{KindSpike, `{"thumbs_down":9,` + win + `}`, "duplicates=show&since=2026-03-01T09%3A30%3A00Z&type=thumbs_down&until=2026-03-02T09%3A30%3A00Z"},
		{KindSafety, `{"reports":2,` + win + `}`, "duplicates=show&safety=1&since=2026-03-01T09%3A30%3A00Z&status=pending&until=2026-03-02T09%3A30%3A00Z"},
		// Details stored before windows were kept: the conditions alone.
		{KindSafety, `{"reports":2}`, "duplicates=show&safety=1&status=pending"},
		{"unknown", `{}`, ""},
	} {
		if got := QueueFilter(c.kind, []byte(c.details)).Encode(); got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.kind, c.details, got, c.want)
		}
	}
}
