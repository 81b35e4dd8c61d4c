package langfuse

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/langfuse/langfusetest"
	"github.com/curate/curate/internal/outbound"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fiveScores are listed newest first by Langfuse: s5, s4, s3, s2, s1.
func fiveScores() []langfusetest.Score {
	return []langfusetest.Score{
		{ID: "s1", TraceID: "tr-1", Name: "rating", DataType: "NUMERIC", Value: 4, Comment: "good", Timestamp: t0.Add(1 * time.Minute)},
		{ID: "s2", TraceID: "tr-2", Name: "helpful", DataType: "BOOLEAN", Value: 0, Timestamp: t0.Add(2 * time.Minute)},
		{ID: "s3", TraceID: "tr-3", ObservationID: "obs-3", Name: "output", DataType: "CORRECTION", StringValue: "The capital is Canberra.", AuthorUserID: "u-9", Source: "ANNOTATION", Timestamp: t0.Add(3 * time.Minute)},
		{ID: "s4", TraceID: "tr-4", Name: "tone", DataType: "CATEGORICAL", StringValue: "formal", ConfigID: "cfg-1", Timestamp: t0.Add(4 * time.Minute)},
		{ID: "s5", SessionID: "sess-5", Name: "session-quality", DataType: "NUMERIC", Value: 0.5, Timestamp: t0.Add(5 * time.Minute)},
	}
}

// wantFive is fiveScores as the client should decode them, in list order,
// written out by hand from the seeds above.
var wantFive = []Score{
	{ID: "s5", SessionID: "sess-5", Name: "session-quality", DataType: DataNumeric, Value: 0.5, Source: "API", Timestamp: t0.Add(5 * time.Minute), CreatedAt: t0.Add(5 * time.Minute)},
	{ID: "s4", TraceID: "tr-4", Name: "tone", DataType: DataCategorical, StringValue: "formal", ConfigID: "cfg-1", Source: "API", Timestamp: t0.Add(4 * time.Minute), CreatedAt: t0.Add(4 * time.Minute)},
	{ID: "s3", TraceID: "tr-3", ObservationID: "obs-3", Name: "output", DataType: DataCorrection, StringValue: "The capital is Canberra.", AuthorUserID: "u-9", Source: "ANNOTATION", Timestamp: t0.Add(3 * time.Minute), CreatedAt: t0.Add(3 * time.Minute)},
	{ID: "s2", TraceID: "tr-2", Name: "helpful", DataType: DataBoolean, Value: 0, StringValue: "False", Source: "API", Timestamp: t0.Add(2 * time.Minute), CreatedAt: t0.Add(2 * time.Minute)},
	{ID: "s1", TraceID: "tr-1", Name: "rating", DataType: DataNumeric, Value: 4, Comment: "good", Source: "API", Timestamp: t0.Add(1 * time.Minute), CreatedAt: t0.Add(1 * time.Minute)},
}

// loopback is an outbound client that may call the test servers, which
// listen on loopback addresses.
func loopback(t *testing.T) *outbound.Client {
	t.Helper()
	p, err := outbound.ParsePolicy("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	return &outbound.Client{Policy: p}
}

func newClient(t *testing.T, srv *langfusetest.Server) *Client {
	t.Helper()
	c, err := New(srv.URL, srv.PublicKey, srv.SecretKey, loopback(t))
	if err != nil {
		t.Fatal(err)
	}
	c.retry = retryPolicy{attempts: 3, base: time.Millisecond, max: 5 * time.Millisecond, maxWait: time.Second}
	return c
}

// listAll follows NextCursor to the end and returns the ids page by page.
func listAll(t *testing.T, c *Client, q ScoresQuery) (ids [][]string, scores []Score, cursors []string) {
	t.Helper()
	for range 20 {
		page, err := c.Scores(context.Background(), q)
		if err != nil {
			t.Fatalf("Scores(cursor %q): %v", q.Cursor, err)
		}
		var pageIDs []string
		for _, s := range page.Scores {
			pageIDs = append(pageIDs, s.ID)
		}
		ids = append(ids, pageIDs)
		scores = append(scores, page.Scores...)
		cursors = append(cursors, page.NextCursor)
		if page.NextCursor == "" {
			return ids, scores, cursors
		}
		q.Cursor = page.NextCursor
	}
	t.Fatal("pagination did not end after 20 pages")
	return nil, nil, nil
}

func TestScoresV3PagesThroughTwoAndAHalfPages(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{Scores: fiveScores()})
	c := newClient(t, srv)

	ids, scores, _ := listAll(t, c, ScoresQuery{Limit: 2})

	want := [][]string{{"s5", "s4"}, {"s3", "s2"}, {"s1"}}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("pages = %v, want %v", ids, want)
	}
	if !reflect.DeepEqual(scores, wantFive) {
		t.Errorf("decoded scores differ:\n got %+v\nwant %+v", scores, wantFive)
	}
	if n := srv.Requests(langfusetest.EndpointScoresV3); n != 3 {
		t.Errorf("v3 requests = %d, want 3", n)
	}
	if n := srv.Requests(langfusetest.EndpointScoresV2); n != 0 {
		t.Errorf("v2 requests = %d, want 0", n)
	}
	if v := c.APIVersion(); v != 3 {
		t.Errorf("APIVersion = %d, want 3", v)
	}
}

func TestScoresFromTimestampIsInclusive(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		srv := langfusetest.NewServer(t, langfusetest.Options{Scores: fiveScores(), V2Only: v2})
		c := newClient(t, srv)
		ids, _, _ := listAll(t, c, ScoresQuery{FromTimestamp: t0.Add(3 * time.Minute)})
		if want := [][]string{{"s5", "s4", "s3"}}; !reflect.DeepEqual(ids, want) {
			t.Errorf("v2only=%v: ids = %v, want %v", v2, ids, want)
		}
	}
}

func TestScoresFallsBackToV2(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{Scores: fiveScores(), V2Only: true})
	c := newClient(t, srv)

	ids, scores, cursors := listAll(t, c, ScoresQuery{Limit: 2})

	if want := [][]string{{"s5", "s4"}, {"s3", "s2"}, {"s1"}}; !reflect.DeepEqual(ids, want) {
		t.Errorf("pages = %v, want %v", ids, want)
	}
	if want := []string{"v2:2", "v2:3", ""}; !reflect.DeepEqual(cursors, want) {
		t.Errorf("cursors = %q, want %q", cursors, want)
	}
	// v2 writes the same scores in its own shape; they must decode the same.
	if !reflect.DeepEqual(scores, wantFive) {
		t.Errorf("decoded scores differ:\n got %+v\nwant %+v", scores, wantFive)
	}
	if n := srv.Requests(langfusetest.EndpointScoresV3); n != 1 {
		t.Errorf("v3 requests = %d, want 1 (only the first page probes v3)", n)
	}
	if n := srv.Requests(langfusetest.EndpointScoresV2); n != 3 {
		t.Errorf("v2 requests = %d, want 3", n)
	}
	if v := c.APIVersion(); v != 2 {
		t.Errorf("APIVersion = %d, want 2", v)
	}

	// A later run starts on v2 without probing v3 again.
	if _, err := c.Scores(context.Background(), ScoresQuery{Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Requests(langfusetest.EndpointScoresV3); n != 1 {
		t.Errorf("v3 requests after a second run = %d, want still 1", n)
	}
}

// A deployment that answered on v2 and was then upgraded to Langfuse v4
// (no v2 scores API) is found on v3 again.
func TestScoresLeavesV2WhenItDisappears(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{Scores: fiveScores(), V3Only: true})
	c := newClient(t, srv)
	c.version.Store(2) // as after an earlier run against the old deployment

	ids, _, _ := listAll(t, c, ScoresQuery{})
	if want := [][]string{{"s5", "s4", "s3", "s2", "s1"}}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids = %v, want %v", ids, want)
	}
	if v2, v3 := srv.Requests(langfusetest.EndpointScoresV2), srv.Requests(langfusetest.EndpointScoresV3); v2 != 1 || v3 != 1 {
		t.Errorf("requests v2, v3 = %d, %d; want 1, 1", v2, v3)
	}
	if v := c.APIVersion(); v != 3 {
		t.Errorf("APIVersion = %d, want 3", v)
	}
}

func TestScoresV2FillsSessionFromTrace(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{
		Scores: []langfusetest.Score{{ID: "a", TraceID: "tr-a", Name: "thumbs", DataType: "NUMERIC", Value: 1, Timestamp: t0}},
		Traces: []langfusetest.Trace{{ID: "tr-a", SessionID: "chat-7", Timestamp: t0}},
		V2Only: true,
	})
	page, err := newClient(t, srv).Scores(context.Background(), ScoresQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Scores) != 1 || page.Scores[0].SessionID != "chat-7" {
		t.Errorf("scores = %+v, want one with SessionID chat-7", page.Scores)
	}
}

func TestScoresRejectsBadQuery(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{})
	c := newClient(t, srv)
	for _, tc := range []struct {
		q     ScoresQuery
		field string
	}{
		{ScoresQuery{Limit: 101}, "limit"},
		{ScoresQuery{Limit: -1}, "limit"},
		{ScoresQuery{Cursor: "v2:0"}, "cursor"},
		{ScoresQuery{Cursor: "v2:x"}, "cursor"},
	} {
		_, err := c.Scores(context.Background(), tc.q)
		var inv *errs.Invalid
		if !errors.As(err, &inv) || inv.ByField()[tc.field] == "" {
			t.Errorf("Scores(%+v) = %v, want an invalid %s", tc.q, err, tc.field)
		}
	}
	if n := srv.Requests(langfusetest.EndpointScoresV3) + srv.Requests(langfusetest.EndpointScoresV2); n != 0 {
		t.Errorf("bad queries reached the server %d times", n)
	}
}

func TestWrongSecretKeyIsUnauthorized(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{Scores: fiveScores()})
	c, err := New(srv.URL, srv.PublicKey, "sk-lf-wrong", loopback(t))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Check(context.Background())
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Check = %v, want ErrUnauthorized", err)
	}
	if errors.Is(err, ErrUnreachable) || errors.Is(err, ErrNotFound) {
		t.Errorf("Check error %v matches another class too", err)
	}
	if d := Describe(err); !strings.Contains(d, "401 Unauthorized") || !strings.Contains(d, "rejected the API keys") ||
		strings.Contains(d, "Invalid credentials") {
		t.Errorf("Describe = %q; want the status and what to fix, not Langfuse's own words", d)
	}
	if _, err := c.Scores(context.Background(), ScoresQuery{}); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Scores = %v, want ErrUnauthorized", err)
	}
	if n := srv.Requests(langfusetest.EndpointScoresV2); n != 0 {
		t.Errorf("a 401 on v3 fell back to v2 (%d requests)", n)
	}
	if n := srv.Requests(langfusetest.EndpointScoresV3); n != 1 {
		t.Errorf("v3 requests = %d, want 1: a 401 is not retried", n)
	}
}

func TestForbiddenIsUnauthorized(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{})
	srv.FailNext(langfusetest.EndpointProjects, http.StatusForbidden, 1)
	err := newClient(t, srv).Check(context.Background())
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Check = %v, want ErrUnauthorized", err)
	}
}

func TestCheckSucceeds(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{})
	if err := newClient(t, srv).Check(context.Background()); err != nil {
		t.Fatalf("Check = %v", err)
	}
	if n := srv.Requests(langfusetest.EndpointProjects); n != 1 {
		t.Errorf("projects requests = %d, want 1", n)
	}
}

func TestUnreachableHost(t *testing.T) {
	// A port that was just free and is now closed refuses connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	c, err := New("http://"+addr, "pk-lf-x", "sk-lf-x", loopback(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.Check(context.Background())
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Check = %v, want ErrUnreachable", err)
	}
	if errors.Is(err, ErrUnauthorized) {
		t.Errorf("unreachable error also matches ErrUnauthorized: %v", err)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("logged message %q should name %s", err, addr)
	}
	if d := Describe(err); d != "The server refused the connection. Check the host URL, and that this server may connect to it." {
		t.Errorf("Describe = %q; want the reason and what to check, without the Go error", d)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refused connection took %s; it must not be retried with backoff", d)
	}
	if _, err := c.Scores(context.Background(), ScoresQuery{}); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Scores = %v, want ErrUnreachable", err)
	}
}

func TestCancelledContextIsNotUnreachable(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := newClient(t, srv).Check(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
		t.Errorf("Check(cancelled) = %v, want context.Canceled only", err)
	}
}

func TestRetriesOne500ThenSucceeds(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{Scores: fiveScores()})
	srv.FailNext(langfusetest.EndpointScoresV3, http.StatusInternalServerError, 1)
	page, err := newClient(t, srv).Scores(context.Background(), ScoresQuery{})
	if err != nil {
		t.Fatalf("Scores = %v, want success after one retry", err)
	}
	if len(page.Scores) != 5 {
		t.Errorf("got %d scores, want 5", len(page.Scores))
	}
	if n := srv.Requests(langfusetest.EndpointScoresV3); n != 2 {
		t.Errorf("v3 requests = %d, want 2", n)
	}
}

func TestRetryGivesUpAfterAttempts(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{})
	srv.FailNext(langfusetest.EndpointTrace, http.StatusServiceUnavailable, 10)
	c := newClient(t, srv) // 3 attempts
	_, err := c.Trace(context.Background(), "tr-1")
	var serr *StatusError
	if !errors.As(err, &serr) || serr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("Trace = %v, want a 503 StatusError", err)
	}
	if serr.Body != "injected 503 (Service Unavailable)" {
		t.Errorf("Body = %q; want the answer's message, for the log", serr.Body)
	}
	if d := Describe(err); strings.Contains(d, "injected") || strings.Contains(err.Error(), "injected") || !strings.Contains(d, "503 Service Unavailable") || !strings.Contains(d, "try again later") {
		t.Errorf("Describe = %q, Error = %q; want the status and advice, and the body in neither", d, err)
	}
	if n := srv.Requests(langfusetest.EndpointTrace); n != 3 {
		t.Errorf("trace requests = %d, want 3", n)
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	t.Run("zero seconds retries at once", func(t *testing.T) {
		srv := langfusetest.NewServer(t, langfusetest.Options{RetryAfter: "0"})
		srv.FailNext(langfusetest.EndpointProjects, http.StatusTooManyRequests, 2)
		c := newClient(t, srv)
		c.retry.base = time.Hour // would hang if Retry-After were ignored
		c.retry.max = time.Hour
		if err := c.Check(context.Background()); err != nil {
			t.Fatalf("Check = %v", err)
		}
		if n := srv.Requests(langfusetest.EndpointProjects); n != 3 {
			t.Errorf("requests = %d, want 3", n)
		}
	})
	t.Run("longer than allowed gives up at once", func(t *testing.T) {
		srv := langfusetest.NewServer(t, langfusetest.Options{RetryAfter: "120"})
		srv.FailNext(langfusetest.EndpointProjects, http.StatusTooManyRequests, 1)
		err := newClient(t, srv).Check(context.Background())
		var serr *StatusError
		if !errors.As(err, &serr) || serr.StatusCode != http.StatusTooManyRequests || serr.RetryAfter != 120*time.Second {
			t.Fatalf("Check = %v, want a 429 StatusError with RetryAfter 2m0s", err)
		}
		if d := Describe(err); !strings.Contains(d, "rate limiting") || !strings.Contains(d, "2m0s") {
			t.Errorf("Describe = %q; want it to say it is rate limited and for how long", d)
		}
		if n := srv.Requests(langfusetest.EndpointProjects); n != 1 {
			t.Errorf("requests = %d, want 1", n)
		}
	})
}

func TestNoRetryOnClientErrors(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{})
	srv.FailNext(langfusetest.EndpointProjects, http.StatusBadRequest, 1)
	err := newClient(t, srv).Check(context.Background())
	var serr *StatusError
	if !errors.As(err, &serr) || serr.StatusCode != http.StatusBadRequest {
		t.Fatalf("Check = %v, want a 400 StatusError", err)
	}
	if n := srv.Requests(langfusetest.EndpointProjects); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{})
	srv.FailNext(langfusetest.EndpointTrace, http.StatusBadGateway, 1)
	c := newClient(t, srv)
	c.retry.base, c.retry.max = time.Hour, time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Trace(ctx, "tr-1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Trace = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled wait took %s", d)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in    string
		want  time.Duration
		found bool
	}{
		{"", 0, false},
		{"3", 3 * time.Second, true},
		{" 0 ", 0, true},
		{"-5", 0, true},
		{"Sun, 01 Mar 2026 12:00:10 GMT", 10 * time.Second, true}, // RFC 9110 IMF-fixdate
		{"Sun, 01 Mar 2026 11:59:00 GMT", 0, true},                // in the past
		{"soon", 0, false},
	} {
		got, found := parseRetryAfter(tc.in, now)
		if got != tc.want || found != tc.found {
			t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", tc.in, got, found, tc.want, tc.found)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	p := retryPolicy{attempts: 5, base: 100 * time.Millisecond, max: 300 * time.Millisecond, maxWait: time.Second}
	// Without Retry-After: base·2^(attempt-1), capped at max, then jittered
	// into [d/2, d].
	for _, tc := range []struct {
		attempt int
		lo, hi  time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 150 * time.Millisecond, 300 * time.Millisecond}, // 400 ms capped to 300
	} {
		for range 50 {
			d, ok := p.delay(tc.attempt, "", time.Now())
			if !ok || d < tc.lo || d > tc.hi {
				t.Fatalf("delay(%d) = %s, %v; want within [%s, %s]", tc.attempt, d, ok, tc.lo, tc.hi)
			}
		}
	}
	if d, ok := p.delay(1, "2", time.Now()); ok || d != 2*time.Second {
		t.Errorf("delay with Retry-After 2 over maxWait 1s = %s, %v; want 2s, false", d, ok)
	}
}

func TestTrace(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{Traces: []langfusetest.Trace{{
		ID: "tr/1", Name: "chat", Timestamp: t0, UserID: "user-7", SessionID: "sess-2",
		Release: "2026.3", Version: "v9", Tags: []string{"prod", "eu"},
		Input:    json.RawMessage(`{"messages":[{"role":"user","content":"Hi?"}]}`),
		Output:   json.RawMessage(`"Hello."`),
		Metadata: json.RawMessage(`{"model":"gpt-4o-mini"}`),
		Observations: []langfusetest.Observation{{
			ID: "obs-1", Type: "GENERATION", Name: "llm", Model: "gpt-4o-mini-2024-07-18", StartTime: t0.Add(time.Second),
			Input: json.RawMessage(`[{"role":"user","content":"Hi?"}]`), Output: json.RawMessage(`{"role":"assistant","content":"Hello."}`),
		}},
	}}})
	c := newClient(t, srv)

	got, err := c.Trace(context.Background(), "tr/1")
	if err != nil {
		t.Fatal(err)
	}
	want := Trace{
		ID: "tr/1", Name: "chat", Timestamp: t0, UserID: "user-7", SessionID: "sess-2",
		Release: "2026.3", Version: "v9", Tags: []string{"prod", "eu"},
		Input:    json.RawMessage(`{"messages":[{"role":"user","content":"Hi?"}]}`),
		Output:   json.RawMessage(`"Hello."`),
		Metadata: json.RawMessage(`{"model":"gpt-4o-mini"}`),
		Observations: []Observation{{
			ID: "obs-1", TraceID: "tr/1", Type: "GENERATION", Name: "llm", Model: "gpt-4o-mini-2024-07-18", StartTime: t0.Add(time.Second),
			Input: json.RawMessage(`[{"role":"user","content":"Hi?"}]`), Output: json.RawMessage(`{"role":"assistant","content":"Hello."}`),
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Trace =\n %+v\nwant\n %+v", got, want)
	}
	if q, r := got.Query(), got.Response(); q != "Hi?" || r != "Hello." {
		t.Errorf("Query, Response = %q, %q; want Hi?, Hello.", q, r)
	}

	_, err = c.Trace(context.Background(), "missing")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("Trace(missing) = %v, want ErrNotFound naming the id", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		host, pk, sk string
		field        string // "" when valid
		wantBase     string
	}{
		{"https://cloud.langfuse.com", "pk-lf-1", "sk-lf-1", "", "https://cloud.langfuse.com"},
		{"https://cloud.langfuse.com/", "pk-lf-1", "sk-lf-1", "", "https://cloud.langfuse.com"},
		{" http://localhost:3000/langfuse/ ", "pk-lf-1", "sk-lf-1", "", "http://localhost:3000/langfuse"},
		{"", "pk-lf-1", "sk-lf-1", "host", ""},
		{"cloud.langfuse.com", "pk-lf-1", "sk-lf-1", "host", ""},
		{"ftp://cloud.langfuse.com", "pk-lf-1", "sk-lf-1", "host", ""},
		{"https://", "pk-lf-1", "sk-lf-1", "host", ""},
		{"https://u:p@cloud.langfuse.com", "pk-lf-1", "sk-lf-1", "host", ""},
		{"https://cloud.langfuse.com?x=1", "pk-lf-1", "sk-lf-1", "host", ""},
		{"https://cloud.langfuse.com/api/public", "pk-lf-1", "sk-lf-1", "host", ""},
		{"https://cloud.langfuse.com", "", "sk-lf-1", "public_key", ""},
		{"https://cloud.langfuse.com", "pk-lf-1", "  ", "secret_key", ""},
		{"https://cloud.langfuse.com", "sk-lf-1", "pk-lf-1", "public_key", ""},
	} {
		c, err := New(tc.host, tc.pk, tc.sk, nil)
		if tc.field == "" {
			if err != nil {
				t.Errorf("New(%q) = %v, want success", tc.host, err)
			} else if c.Host() != tc.wantBase {
				t.Errorf("New(%q).Host() = %q, want %q", tc.host, c.Host(), tc.wantBase)
			}
			continue
		}
		var inv *errs.Invalid
		if !errors.As(err, &inv) || inv.ByField()[tc.field] == "" {
			t.Errorf("New(%q, %q, %q) = %v, want a message for %s", tc.host, tc.pk, tc.sk, err, tc.field)
		}
	}
}

func TestCheckOnNonLangfuseServer(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	c, err := New(other.URL, "pk-lf-1", "sk-lf-1", loopback(t))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Check(context.Background())
	if !errors.Is(err, ErrNotFound) || !strings.Contains(Describe(err), "Is "+other.URL+" the Langfuse base URL") {
		t.Errorf("Check = %v (%q), want ErrNotFound asking whether the host is the base URL", err, Describe(err))
	}
	_, err = c.Scores(context.Background(), ScoresQuery{})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "neither /api/public/v3/scores nor /api/public/v2/scores") {
		t.Errorf("Scores = %v, want an error naming both endpoints", err)
	}
}

func TestNonJSONAnswer(t *testing.T) {
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body>Sign in</body></html>"))
	}))
	defer html.Close()
	c, err := New(html.URL, "pk-lf-1", "sk-lf-1", loopback(t))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Check(context.Background())
	if d := Describe(err); !strings.Contains(d, "is "+html.URL+" a Langfuse deployment?") || strings.Contains(d, "<") {
		t.Errorf("Check = %v (%q), want a question whether the host is Langfuse", err, d)
	}
}

func TestErrorBodyOfAProxy(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html>\n  <h1>502 Bad Gateway</h1>\n</html>"))
	}))
	defer proxy.Close()
	c, err := New(proxy.URL, "pk-lf-1", "sk-lf-1", loopback(t))
	if err != nil {
		t.Fatal(err)
	}
	c.retry = retryPolicy{attempts: 1}
	err = c.Check(context.Background())
	var serr *StatusError
	if !errors.As(err, &serr) || serr.Body != "<html> <h1>502 Bad Gateway</h1> </html>" {
		t.Errorf("Check = %v, want a 502 with the body's text on one line, for the log", err)
	}
}

func TestResponseSizeIsLimited(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{Scores: fiveScores()})
	out := loopback(t)
	out.MaxBody = 200 // one page of five scores is well over 200 bytes
	c, err := New(srv.URL, srv.PublicKey, srv.SecretKey, out)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Scores(context.Background(), ScoresQuery{})
	var large *outbound.TooLargeError
	if !errors.As(err, &large) || errors.Is(err, ErrUnreachable) || Describe(err) != "The server's answer was too large." {
		t.Errorf("Scores = %v (%q), want a size-limit error", err, Describe(err))
	}
}

func TestErrorMessage(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"message":"Invalid credentials","error":"UnauthorizedError"}`, "Invalid credentials (UnauthorizedError)"},
		{`{"message":"Invalid request data","error":[{"path":["limit"],"message":"too big"}]}`, `Invalid request data ([{"path":["limit"],"message":"too big"}])`},
		{`{"message":"Trace not found","error":"Trace not found"}`, "Trace not found"},
		{`{"error":"Unauthorized"}`, "Unauthorized"},
		{"upstream   timed\nout", "upstream timed out"},
		{"", ""},
	} {
		if got := errorMessage([]byte(tc.body)); got != tc.want {
			t.Errorf("errorMessage(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

// Without an operator's permission a Langfuse on a loopback address is not
// called, by address or by a name that resolves to one; what the page is
// told names the setting, not the address.
func TestLoopbackHostIsRefused(t *testing.T) {
	srv := langfusetest.NewServer(t, langfusetest.Options{})
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{srv.URL, "http://localhost:" + u.Port()} {
		c, err := New(host, srv.PublicKey, srv.SecretKey, nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = c.Check(context.Background())
		var refused *outbound.RefusedError
		if !errors.As(err, &refused) || !errors.Is(err, ErrUnreachable) {
			t.Fatalf("Check(%s) = %v, want a refused address", host, err)
		}
		if d := Describe(err); !strings.Contains(d, "CURATE_OUTBOUND_ALLOW") || strings.Contains(d, "127.0.0.1") || strings.Contains(d, "dial") {
			t.Errorf("Describe = %q; want the setting named, and neither the address nor the Go error", d)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("a refused address took %s; it must not be retried with backoff", d)
		}
	}
	if n := srv.Requests(langfusetest.EndpointProjects); n != 0 {
		t.Errorf("the refused server got %d requests", n)
	}
}

// A host allowed by name that redirects to an address the policy refuses
// is followed no further.
func TestRedirectToRefusedAddress(t *testing.T) {
	target := langfusetest.NewServer(t, langfusetest.Options{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusFound)
	}))
	defer front.Close()
	fu, err := url.Parse(front.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New("http://localhost:"+fu.Port(), target.PublicKey, target.SecretKey, &outbound.Client{Policy: outbound.Policy{Hosts: []string{"localhost"}}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Check(context.Background())
	var refused *outbound.RefusedError
	if !errors.As(err, &refused) || refused.Addr.String() != "127.0.0.1" {
		t.Fatalf("Check = %v, want the redirect's address refused", err)
	}
	if n := target.Requests(langfusetest.EndpointProjects); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}

// What a failing server says stays out of every message but the log's.
func TestRemoteBodyStaysInTheLog(t *testing.T) {
	const marker = "REMOTE-BODY-MARKER-7f3a"
	srv := langfusetest.NewServer(t, langfusetest.Options{FailMessage: marker})
	srv.FailNext(langfusetest.EndpointProjects, http.StatusInternalServerError, 10)
	err := newClient(t, srv).Check(context.Background())
	var serr *StatusError
	if !errors.As(err, &serr) || !strings.Contains(serr.Body, marker) {
		t.Fatalf("Check = %v, want a 500 keeping the body for the log", err)
	}
	if strings.Contains(err.Error(), marker) || strings.Contains(Describe(err), marker) || strings.Contains(outbound.Describe(err), marker) {
		t.Errorf("the remote body reached a message: %q / %q", err, Describe(err))
	}
	if d := Describe(err); !strings.HasPrefix(d, "The server answered 500 Internal Server Error.") {
		t.Errorf("Describe = %q", d)
	}
}
