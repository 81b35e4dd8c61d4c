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
