// Package ratelimit keeps one token bucket per key (an API key, an end
// user), in memory, forgetting keys that have been idle for a while.
//
// Buckets live in the process, so that a request costs no round trip to
// the database. With several web servers, each enforces its share of the
// limit (Share): the rate and the burst divided by the number of live
// servers, so that together they allow no more than the limit, however
// the load balancer spreads the requests. A key whose requests all go to
// one server gets only that server's share.
package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter holds a bucket per key.
type Limiter struct {
	rate    rate.Limit // the whole limit, over all servers
	burst   int
	servers int // the servers sharing the limit
	idle    time.Duration
	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
	now     func() time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// New allows perSecond events per key on average, and bursts of burst.
func New(perSecond float64, burst int) *Limiter {
	return &Limiter{rate: rate.Limit(perSecond), burst: burst, servers: 1, idle: 10 * time.Minute,
		buckets: map[string]*bucket{}, now: time.Now}
}

// Share makes this process enforce its part of a limit shared by n
// servers: the rate divided by n, and the burst divided by n, rounded
// down but at least one request. Buckets already started keep the tokens
// they hold, up to the new burst.
func (l *Limiter) Share(n int) {
	n = max(n, 1)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n == l.servers {
		return
	}
	l.servers = n
	r, b := l.part()
	for _, bk := range l.buckets {
		bk.lim.SetLimitAt(now, r)
		bk.lim.SetBurstAt(now, b)
	}
}

// part is this server's share of the rate and the burst; l.mu is held.
func (l *Limiter) part() (rate.Limit, int) {
	return l.rate / rate.Limit(l.servers), max(l.burst/l.servers, 1)
}

// Allow takes a token for key. When none is left it returns false and how
// long until one is.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > l.idle {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > l.idle {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(l.part())}
		l.buckets[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Minute
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}
