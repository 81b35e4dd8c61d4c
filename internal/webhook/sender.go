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
	"strings"
	"time"

	"github.com/sethvargo/go-retry"
)

// Endpoint is where a delivery goes and the secret that signs it.
type Endpoint struct {
	URL    string
	Secret string
}

// Sender POSTs signed JSON deliveries, retrying with exponential backoff
// on network errors, 5xx and 429 answers. Other 4xx answers mean the
// receiver refused this delivery and a retry would be refused the same way,
// so they end it at once. The zero value is usable.
type Sender struct {
	// Client sends the requests; nil means a client with a 30-second
	// timeout per attempt.
	Client *http.Client
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

// StatusError is a non-2xx answer.
type StatusError struct {
	StatusCode int
	// Body is the start of the response body, for the delivery log.
	Body string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("webhook: endpoint answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// retryable reports whether an answer with this status may succeed later.
func retryable(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests
}

// maxErrorBody is how much of a failed answer's body is kept in StatusError;
// maxDrain is how much is read so the connection can be reused.
const (
	maxErrorBody = 512
	maxDrain     = 64 << 10
)

// Send delivers payload, marshalled to JSON once, to the endpoint under
// message id. Each attempt is stamped with the current time and signed
// again; the id stays the same. It returns when an attempt gets a 2xx
// answer, when the error is not retryable, after MaxAttempts, or when ctx
// is done (the wait between attempts included).
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

	client := s.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	var lastErr error
	err = retry.Do(ctx, s.backoff(), func(ctx context.Context) error {
		res.Attempts++
		code, err := s.attempt(ctx, client, ep, id, body)
		res.StatusCode = code
		lastErr = err
		var se *StatusError
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &se) && !retryable(se.StatusCode):
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
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		return resp.StatusCode, nil
	}
	start, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	return resp.StatusCode, &StatusError{StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(start))}
}
