package ratelimit

import (
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

func TestIdleKeysForgotten(t *testing.T) {
	now := time.Now()
	l := New(1, 1)
	l.now = func() time.Time { return now }
	l.Allow("a")
	now = now.Add(11 * time.Minute)
	l.Allow("b")
	if _, ok := l.buckets["a"]; ok {
		t.Fatal("idle key kept")
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
