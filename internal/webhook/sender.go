package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/curate/curate/internal/outbound"
)

// Endpoint is where a delivery goes and the secret that signs it.
type Endpoint struct {
	URL    string
	Secret string
}

// Sender POSTs signed JSON deliveries, retrying with exponential backoff
// on network errors, 5xx and 429 answers. Other 4xx answers mean the
// receiver refused this delivery and a retry would be refused the same way,
// so they end it at once, as does an address the outbound policy refuses.
// The zero value is usable.
type Sender struct {
	// Outbound sends the requests, checking the address of each connection
	// and redirect; nil allows public addresses only.
	Outbound *outbound.Client
	// MaxAttempts is the number of tries, the first included (default 5).
	MaxAttempts int
	// BaseDelay is the wait after the first failure, doubled after each
	// further one (default 1s), with 10% jitter.
	BaseDelay time.Duration
	// MaxDelay caps one wait (default 1m).
	MaxDelay time.Duration
	// Now gives the time each attempt is stamped with (default time.Now).
	Now func() time.Time
}

// Result describes a delivery, successful or not.
type Result struct {
	// Attempts is the number of requests sent.
	Attempts int
	// StatusCode is the last HTTP status received, 0 if none was.
	StatusCode int
}

// retryable reports whether a failed attempt may succeed later: a 5xx or
// 429 answer, or a network error, but not an address the policy refuses.
func retryable(err error) bool {
	var (
		status   *outbound.StatusError
		refused  *outbound.RefusedError
		redirect *outbound.RedirectError
	)
	switch {
	case errors.As(err, &status):
		return status.Status >= 500 || status.Status == http.StatusTooManyRequests
	case errors.As(err, &refused), errors.As(err, &redirect):
		return false
	}
	return true
}

// maxDrain is how much of a 2xx answer is read so the connection can be
// reused.
const maxDrain = 64 << 10

// Send delivers payload, marshalled to JSON once, to the endpoint under
// message id. Each attempt is stamped with the current time and signed
// again; the id stays the same. It returns when an attempt gets a 2xx
// answer, when the error is not retryable, after MaxAttempts, or when ctx
// is done (the wait between attempts included). A receiver's refusal is an
// *outbound.StatusError, whose Body is for the log only;
// outbound.Describe says what happened in words fit for a page.
func (s *Sender) Send(ctx context.Context, ep Endpoint, id string, payload any) (Result, error) {
	var res Result
	if id == "" {
		return res, errors.New("webhook: empty message id")
	}
	if _, err := decodeSecret(ep.Secret); err != nil {
		return res, err
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return res, fmt.Errorf("webhook: encoding payload: %w", err)
	}

	out := s.Outbound
	if out == nil {
		out = &outbound.Client{}
	}
	client := out.HTTP()
	var lastErr error
	err = retry.Do(ctx, s.backoff(), func(ctx context.Context) error {
		res.Attempts++
		code, err := s.attempt(ctx, client, ep, id, body)
		res.StatusCode = code
		lastErr = err
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !retryable(err):
			return err
		}
		return retry.RetryableError(err)
	})
	if err != nil && ctx.Err() != nil && lastErr != nil && !errors.Is(lastErr, ctx.Err()) {
		// Say why the delivery was still being retried when time ran out.
		err = fmt.Errorf("%w (last attempt: %w)", err, lastErr)
	}
	return res, err
}

func (s *Sender) backoff() retry.Backoff {
	attempts := cmp.Or(s.MaxAttempts, 5)
	base, ceiling := s.BaseDelay, s.MaxDelay
	if base <= 0 {
		base = time.Second
	}
	if ceiling <= 0 {
		ceiling = time.Minute
	}
	b := retry.NewExponential(base)
	b = retry.WithJitterPercent(10, b)
	b = retry.WithCappedDuration(ceiling, b)
	return retry.WithMaxRetries(uint64(max(attempts-1, 0)), b)
}

// attempt sends one signed request and returns the status received.
func (s *Sender) attempt(ctx context.Context, client *http.Client, ep Endpoint, id string, body []byte) (int, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ts := now()
	sig, err := Sign(ep.Secret, id, ts, body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)

	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("webhook: %w", err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	return resp.StatusCode, outbound.Status(resp)
}
