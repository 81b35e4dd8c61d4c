// Package ratelimit keeps one token bucket per key (an API key, an end
// user), in memory, forgetting keys that have been idle for a while.
//
// Buckets live in the process, so that a request costs no round trip to
// the database. With several web servers, each enforces its share of the
// limit (Share): the rate and the burst divided by the number of live
// servers, so that together they allow no more than the limit, however
// the load balancer spreads the requests. A key whose requests all go to
// one server gets only that server's share.
//
// Every request of a limiter's keys takes its one lock, so nothing done
// under it may grow with the number of keys: a busy assistant has a
// million end users, and a walk over their buckets held every feedback
// request for a second. Idle keys are dropped a generation at a time, and
// a new share reaches each bucket at its next request.
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
	servers int       // the servers sharing the limit
	shared  time.Time // when servers last changed
	idle    time.Duration
	mu      sync.Mutex
	// Buckets are kept in two generations. A key is looked for in the
	// current one, then in the previous one, from which it moves up. Once
	// per idle period the previous generation is dropped whole and the
	// current one takes its place: a key unused for two periods is gone,
	// and forgetting costs nothing per key.
	cur, prev map[string]*bucket
	rotated   time.Time
	now       func() time.Time
}

type bucket struct {
	lim     *rate.Limiter
	servers int // the share its rate and burst were set for
}

// New allows perSecond events per key on average, and bursts of burst.
func New(perSecond float64, burst int) *Limiter {
	return &Limiter{rate: rate.Limit(perSecond), burst: burst, servers: 1, idle: 10 * time.Minute,
		cur: map[string]*bucket{}, prev: map[string]*bucket{}, now: time.Now}
}

// Share makes this process enforce its part of a limit shared by n
// servers: the rate divided by n, and the burst divided by n, rounded
// down but at least one request. Buckets already started keep the tokens
// they hold, up to the new burst; each takes the new share, from now, at
// its next request.
func (l *Limiter) Share(n int) {
	n = max(n, 1)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n != l.servers {
		l.servers, l.shared = n, now
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
	b := l.bucket(key, now)
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

// bucket finds or starts key's bucket at the current share; l.mu is held.
func (l *Limiter) bucket(key string, now time.Time) *bucket {
	if l.rotated.IsZero() {
		l.rotated = now
	}
	if now.Sub(l.rotated) > l.idle {
		l.prev, l.cur, l.rotated = l.cur, map[string]*bucket{}, now
	}
	b := l.cur[key]
	if b == nil {
		if b = l.prev[key]; b != nil {
			delete(l.prev, key)
		} else {
			b = &bucket{lim: rate.NewLimiter(l.part()), servers: l.servers}
		}
		l.cur[key] = b
	}
	if b.servers != l.servers {
		// The share changed since this bucket's last request: the tokens
		// it gained until then came at the old rate.
		at := l.shared
		if at.After(now) {
			at = now
		}
		r, burst := l.part()
		b.lim.SetLimitAt(at, r)
		b.lim.SetBurstAt(at, burst)
		b.servers = l.servers
	}
	return b
}
