// Package langfuse reads feedback scores and the traces they rate from a
// Langfuse project through its public REST API, and maps them onto Curate's
// feedback fields.
//
// Endpoints used (all under <host>/api/public, Basic auth with the project's
// public key as user name and secret key as password):
//
//   - GET /v3/scores (cursor pagination, typed value, field groups) and, where
//     that answers 404 (self-hosted Langfuse before v3.179 or with the v3
//     scores API switched off), GET /v2/scores (page pagination);
//   - GET /traces/{traceId} for a trace's input, output and observations;
//   - GET /projects, the cheapest authenticated call, for Check.
//
// Langfuse v4 deprecates GET /traces/{traceId} in favour of
// GET /v2/observations filtered by trace; Trace.Query and Trace.Response
// already fall back to observation input and output for traces that carry
// none of their own, as v4 traces do.
package langfuse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/outbound"
)

// checkTimeout bounds Check, which backs an interactive page.
const checkTimeout = 10 * time.Second

// Client talks to one Langfuse project. It is safe for concurrent use.
type Client struct {
	base      string // scheme://host[/prefix], no trailing slash
	publicKey string
	secretKey string
	http      *http.Client
	retry     retryPolicy
	// version is the scores API version that last answered: 0 (none yet),
	// 2 or 3. Once v3 has answered 404, later first pages go straight to v2.
	version atomic.Int32
}

// retryPolicy bounds retries of 429 and 5xx answers.
type retryPolicy struct {
	attempts int           // total tries, the first included
	base     time.Duration // first backoff; doubled per retry
	max      time.Duration // cap on one computed backoff
	maxWait  time.Duration // longest Retry-After we are willing to sleep
}

var defaultRetry = retryPolicy{attempts: 4, base: 500 * time.Millisecond, max: 8 * time.Second, maxWait: 30 * time.Second}

// New returns a client for the Langfuse deployment at host (for example
// https://cloud.langfuse.com, or a self-hosted base URL with an optional path
// prefix). Every call goes through out, the outbound client, which checks
// the address each connection and redirect reaches, bounds the time of an
// exchange (30 s by default) and the size of an answer (32 MiB by default:
// a trace with many large observations is the biggest answer read). A nil
// out allows public addresses only.
// Invalid arguments give an *errs.Invalid naming the fields host, public_key
// and secret_key, so a settings form can show each message beside its field.
func New(host, publicKey, secretKey string, out *outbound.Client) (*Client, error) {
	inv := &errs.Invalid{}
	base, err := normalizeHost(host)
	if err != nil {
		inv.Add("host", "%s", err.Error())
	}
	publicKey, secretKey = strings.TrimSpace(publicKey), strings.TrimSpace(secretKey)
	if publicKey == "" {
		inv.Add("public_key", "is required: copy the public key (pk-lf-…) from the Langfuse project settings, API keys")
	}
	if secretKey == "" {
		inv.Add("secret_key", "is required: copy the secret key (sk-lf-…) from the Langfuse project settings, API keys")
	}
	if strings.HasPrefix(publicKey, "sk-lf-") && strings.HasPrefix(secretKey, "pk-lf-") {
		inv.Add("public_key", "holds a secret key (sk-lf-…) and the secret key field a public key: swap the two")
	}
	if err := inv.Err(); err != nil {
		return nil, err
	}
	if out == nil {
		out = &outbound.Client{}
	}
	return &Client{
		base:      base,
		publicKey: publicKey,
		secretKey: secretKey,
		http:      out.HTTP(),
		retry:     defaultRetry,
	}, nil
}

// normalizeHost checks that host is an absolute http(s) URL without
// credentials, query or fragment, and strips trailing slashes.
func normalizeHost(host string) (string, error) {
	host = strings.TrimSpace(host)
	if host == "" {
		return "", errors.New("is required, like https://cloud.langfuse.com")
	}
	u, err := url.Parse(host)
	if err != nil {
		return "", fmt.Errorf("is not a URL (%v): write it like https://cloud.langfuse.com", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q must start with https:// (or http:// for a local deployment)", host)
	case u.Host == "":
		return "", fmt.Errorf("%q has no host name: write it like https://cloud.langfuse.com", host)
	case u.User != nil:
		return "", errors.New("must not contain a user name or password: put the keys in their own fields")
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%q must not have a query or fragment: give the base URL only", host)
	}
	if strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/api/public") {
		return "", fmt.Errorf("%q ends in /api/public: give the base URL only, like https://cloud.langfuse.com", host)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"), nil
}

// Host is the base URL the client talks to.
func (c *Client) Host() string { return c.base }

// APIVersion is the scores API version that last answered (3 or 2), or 0
// before the first successful Scores call.
func (c *Client) APIVersion() int { return int(c.version.Load()) }

// Check makes one cheap authenticated call (GET /api/public/projects) so a
// settings page can tell whether host and keys work. Errors match
// ErrUnauthorized, ErrUnreachable or are a *StatusError; Describe says what
// to fix. Check gives up after 10 s even when ctx allows longer.
func (c *Client) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var projects struct {
		Data []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"data"`
	}
	return c.get(ctx, "/api/public/projects", nil, &projects)
}

// get performs an authenticated GET of c.base+path (path already escaped)
// and decodes a 2xx JSON answer into out. 429 and 5xx answers are retried
// with exponential backoff, honouring Retry-After, up to c.retry.attempts
// tries; ctx cancels both the request and any wait between tries.
func (c *Client) get(ctx context.Context, path string, query url.Values, out any) error {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return fmt.Errorf("langfuse: building request for %s: %w", path, err)
		}
		req.SetBasicAuth(c.publicKey, c.secretKey)
		req.Header.Set("Accept", "application/json")

		resp, err := c.http.Do(req)
		if err != nil {
			return c.transportError(ctx, path, err)
		}
		body, readErr := io.ReadAll(resp.Body)
		resp.Body.Close()

		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			if readErr != nil {
				return c.transportError(ctx, path, readErr)
			}
			if err := json.Unmarshal(body, out); err != nil {
				return &AnswerError{Host: c.base, Path: path, Err: err}
			}
			return nil
		}

		serr := &StatusError{Host: c.base, Path: path, StatusCode: resp.StatusCode, Body: errorMessage(body)}
		serr.RetryAfter, _ = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		if !retryable(resp.StatusCode) || attempt >= c.retry.attempts {
			return serr
		}
		wait, ok := c.retry.delay(attempt, resp.Header.Get("Retry-After"), time.Now())
		if !ok {
			return serr
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// delay is the wait before try attempt+1: the server's Retry-After when it
// sent one (seconds or an HTTP date), else base·2^(attempt-1) capped at max,
// with jitter so that several workers do not retry in step. ok is false when
// the server asks for a longer wait than maxWait; the caller then gives up
// and reports the wait instead of blocking a job for minutes.
func (p retryPolicy) delay(attempt int, retryAfter string, now time.Time) (wait time.Duration, ok bool) {
	if d, found := parseRetryAfter(retryAfter, now); found {
		return d, d <= p.maxWait
	}
	d := p.base << (attempt - 1)
	if d > p.max || d <= 0 {
		d = p.max
	}
	if half := d / 2; half > 0 {
		d = half + rand.N(half+1)
	}
	return d, true
}

// parseRetryAfter reads a Retry-After header (RFC 9110 §10.2.3): a number of
// seconds or an HTTP date. Waits in the past count as zero.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, true
		}
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// transportError turns a failed exchange into ctx's own error when the
// caller cancelled; an answer over the size cap stays what it is; anything
// else (the address refused by the outbound policy included) is an
// ErrUnreachable. The message is for the log: Describe gives the page's.
func (c *Client) transportError(ctx context.Context, path string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	var large *outbound.TooLargeError
	if errors.As(err, &large) {
		return fmt.Errorf("langfuse: GET %s at %s: %w", path, c.base, err)
	}
	return fmt.Errorf("%w: GET %s at %s: %w", ErrUnreachable, path, c.base, err)
}
