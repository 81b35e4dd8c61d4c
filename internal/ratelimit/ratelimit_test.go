package ratelimit

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := New(10.0/60, 10) // 10 per minute, as the feedback API's per-user limit
	l.now = func() time.Time { return now }
	for i := range 10 {
		if ok, _ := l.Allow("u1"); !ok {
			t.Fatalf("request %d refused within the burst", i+1)
		}
	}
	ok, wait := l.Allow("u1")
	if ok {
		t.Fatal("11th request in the same instant allowed")
	}
	if wait < 5*time.Second || wait > 7*time.Second {
		t.Fatalf("retry after %v, want about 6s (one token per 6s)", wait)
	}
	if ok, _ := l.Allow("u2"); !ok {
		t.Fatal("another key shares the bucket")
	}
	now = now.Add(6 * time.Second)
	if ok, _ := l.Allow("u1"); !ok {
		t.Fatal("no token after 6s")
	}
	if ok, _ := l.Allow("u1"); ok {
		t.Fatal("two tokens after 6s")
	}
}

// A key unused for two idle periods is forgotten; one used in the period
// before keeps its bucket, with what it spent.
func TestIdleKeysForgotten(t *testing.T) {
	now := time.Now()
	l := New(1.0/60, 2)
	l.now = func() time.Time { return now }
	l.Allow("idle")
	l.Allow("busy")
	l.Allow("busy")
	now = now.Add(11 * time.Minute)
	l.Allow("other") // a period has passed: both move to the previous generation
	now = now.Add(time.Second)
	if _, wait := l.Allow("busy"); wait != 0 {
		t.Fatalf("busy was refused (wait %v) after 11 minutes at 1 a minute", wait)
	}
	now = now.Add(11 * time.Minute)
	l.Allow("other")
	if _, ok := l.prev["idle"]; ok {
		t.Fatal("a key idle for two periods is kept")
	}
	if _, ok := l.cur["idle"]; ok {
		t.Fatal("a key idle for two periods is kept")
	}
	if _, ok := l.prev["busy"]; !ok {
		t.Fatal("a key used in the last period is forgotten")
	}
}

// Forgetting costs a request nothing per key: a million end users' buckets
// are dropped with their generation, not walked under the lock every
// request takes (which held each feedback request for a second).
func TestForgettingWalksNoBuckets(t *testing.T) {
	now := time.Now()
	l := New(10.0/60, 10)
	l.now = func() time.Time { return now }
	for i := range 1000 {
		l.Allow("u" + strconv.Itoa(i))
	}
	now = now.Add(11 * time.Minute)
	l.Allow("u0")
	if len(l.cur) != 1 || len(l.prev) != 999 {
		t.Fatalf("after a period: %d current, %d previous, want 1 and 999 (moved as a whole)", len(l.cur), len(l.prev))
	}
	now = now.Add(11 * time.Minute)
	l.Allow("u1")
	if len(l.cur) != 1 || len(l.prev) != 1 {
		t.Fatalf("after two periods: %d current, %d previous, want 1 and 1", len(l.cur), len(l.prev))
	}
}

// Shared by n servers, each allows its nth of the rate and the burst, so
// that together they stay within the limit; a bucket already full is cut
// down to the new burst.
func TestShare(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := New(10.0/60, 10)
	l.now = func() time.Time { return now }
	if ok, _ := l.Allow("full"); !ok { // a bucket holding 9 tokens
		t.Fatal("first request refused")
	}
	l.Share(2)
	for _, key := range []string{"full", "new"} {
		allowed := 0
		for range 10 {
			if ok, _ := l.Allow(key); ok {
				allowed++
			}
		}
		if allowed != 5 {
			t.Errorf("%s: %d of 10 allowed at once with two servers, want 5", key, allowed)
		}
	}
	_, wait := l.Allow("new")
	if wait < 11*time.Second || wait > 13*time.Second {
		t.Errorf("retry after %v, want about 12s (5 a minute on this server)", wait)
	}

	// A server leaving gives its share back.
	l.Share(1)
	now = now.Add(time.Minute)
	allowed := 0
	for range 20 {
		if ok, _ := l.Allow("new"); ok {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d allowed after a minute alone again, want the whole burst of 10", allowed)
	}

	// More servers than the burst: each still allows one request.
	l.Share(50)
	now = now.Add(time.Hour)
	if ok, _ := l.Allow("other"); !ok {
		t.Error("a 50th share of a burst of 10 allows nothing")
	}
	if ok, _ := l.Allow("other"); ok {
		t.Error("two requests at once from a 50th share of a burst of 10")
	}
}

// Check-then-act under load: 64 requests of one key racing at the moment
// its generation is retired get exactly the tokens its bucket has left,
// not a fresh bucket each for those that find it in the previous
// generation at once.
func TestConcurrentAllowAcrossRotation(t *testing.T) {
	now := time.Now()
	l := New(1e-6, 10)
	l.now = func() time.Time { return now }
	for range 3 {
		if ok, _ := l.Allow("k"); !ok {
			t.Fatal("refused within the burst")
		}
	}
	now = now.Add(11 * time.Minute) // the next request retires the generation
	var allowed atomic.Int64
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for range 64 {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			if ok, _ := l.Allow("k"); ok {
				allowed.Add(1)
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	if got := allowed.Load(); got != 7 {
		t.Fatalf("%d of 64 racing requests allowed, want the 7 left of a burst of 10", got)
	}
}
