package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkAllowMillionUsers is the feedback API's per-user limit with a
// million end users: the request that finds the idle period over (it used
// to walk every bucket, under the lock that every feedback request takes)
// beside the mean request. The limiter's clock is its own, so only the
// work is measured.
func BenchmarkAllowMillionUsers(b *testing.B) {
	const users = 1_000_000
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := New(10.0/60, 10)
	l.now = func() time.Time { return now }
	keys := make([]string, users)
	for i := range keys {
		keys[i] = "org\x00user-" + strconv.Itoa(i)
		l.Allow(keys[i])
	}
	var turn, total time.Duration
	calls := 0
	for b.Loop() {
		// The idle period passes; half the users come back.
		now = now.Add(11 * time.Minute)
		t0 := time.Now()
		l.Allow("org\x00first-after-the-period")
		turn = max(turn, time.Since(t0))
		t0 = time.Now()
		for i := 0; i < users; i += 2 {
			l.Allow(keys[i])
		}
		total += time.Since(t0)
		calls += users / 2
	}
	b.ReportMetric(float64(turn.Microseconds())/1000, "period_turn_ms")
	b.ReportMetric(float64(total.Nanoseconds())/float64(calls)/1000, "mean_allow_us")
}
