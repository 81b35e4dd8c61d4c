package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/curate/curate/internal/outbound"
)

// The test vector published with the Standard Webhooks specification (and
// used by its reference libraries' tests).
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignSpecVector(t *testing.T) {
	got, err := Sign(specSecret, specID, time.Unix(specTimestamp, 0), []byte(specBody))
	if err != nil {
		t.Fatal(err)
	}
	if got != specSignature {
		t.Fatalf("Sign = %q, want %q", got, specSignature)
	}
	// The prefix is optional.
	got, err = Sign(strings.TrimPrefix(specSecret, "whsec_"), specID, time.Unix(specTimestamp, 0), []byte(specBody))
	if err != nil || got != specSignature {
		t.Fatalf("Sign without prefix = %q, %v", got, err)
	}
}

func TestNewSecretSignsLikePlainHMAC(t *testing.T) {
	secret := NewSecret()
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("secret %q lacks whsec_ prefix", secret)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) != 32 {
		t.Fatalf("key: %d bytes, %v", len(key), err)
	}
	if NewSecret() == secret {
		t.Fatal("two secrets are equal")
	}

	m := hmac.New(sha256.New, key)
	m.Write([]byte("msg_1.1700000000.{\"a\":1}"))
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	got, err := Sign(secret, "msg_1", time.Unix(1700000000, 0), []byte(`{"a":1}`))
	if err != nil || got != want {
		t.Fatalf("Sign = %q, %v; want %q", got, err, want)
	}
}

func TestSecretValidation(t *testing.T) {
	short := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 16))
	for _, secret := range []string{"whsec_not base64!", short, ""} {
		if _, err := Sign(secret, "m", time.Now(), nil); !errors.Is(err, ErrInvalidSecret) {
			t.Errorf("Sign with secret %q: err = %v, want ErrInvalidSecret", secret, err)
		}
	}
}

func TestVerify(t *testing.T) {
	signedAt := time.Unix(specTimestamp, 0)
	headers := func(id, ts, sig string) http.Header {
		h := http.Header{}
		if id != "" {
			h.Set("Webhook-Id", id)
		}
		if ts != "" {
			h.Set("Webhook-Timestamp", ts)
		}
		if sig != "" {
			h.Set("Webhook-Signature", sig)
		}
		return h
	}
	const ts = "1614265330"
	other := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	tests := []struct {
		name string
		h    http.Header
		body string
		now  time.Time
		want error
	}{
		{"spec vector", headers(specID, ts, specSignature), specBody, signedAt, nil},
		{"within tolerance after", headers(specID, ts, specSignature), specBody, signedAt.Add(4 * time.Minute), nil},
		{"within tolerance before", headers(specID, ts, specSignature), specBody, signedAt.Add(-4 * time.Minute), nil},
		{"one of several signatures", headers(specID, ts, "v2,abc "+other+" "+specSignature), specBody, signedAt, nil},
		{"body changed", headers(specID, ts, specSignature), `{"test": 2432232315}`, signedAt, ErrNoMatch},
		{"id changed", headers("msg_other", ts, specSignature), specBody, signedAt, ErrNoMatch},
		{"signature of another version only", headers(specID, ts, "v1a,"+strings.TrimPrefix(specSignature, "v1,")), specBody, signedAt, ErrNoMatch},
		{"too old", headers(specID, ts, specSignature), specBody, signedAt.Add(6 * time.Minute), ErrTimestampRange},
		{"too new", headers(specID, ts, specSignature), specBody, signedAt.Add(-6 * time.Minute), ErrTimestampRange},
		{"timestamp changed within tolerance", headers(specID, "1614265331", specSignature), specBody, signedAt, ErrNoMatch},
		{"timestamp not a number", headers(specID, "yesterday", specSignature), specBody, signedAt, ErrInvalidTimestamp},
		{"no id", headers("", ts, specSignature), specBody, signedAt, ErrMissingHeader},
		{"no signature", headers(specID, ts, ""), specBody, signedAt, ErrMissingHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(specSecret, tt.h, []byte(tt.body), tt.now, DefaultTolerance)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

// receiver records deliveries and answers them from a script of statuses
// (the last one repeats).
type receiver struct {
	secret   string
	statuses []int
	mu       sync.Mutex
	got      []delivery
}

type delivery struct {
	id, timestamp, contentType string
	body                       string
	verifyErr                  error
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rv.mu.Lock()
	n := len(rv.got)
	rv.got = append(rv.got, delivery{
		id:          r.Header.Get(HeaderID),
		timestamp:   r.Header.Get(HeaderTimestamp),
		contentType: r.Header.Get("Content-Type"),
		body:        string(body),
		verifyErr:   Verify(rv.secret, r.Header, body, time.Now(), DefaultTolerance),
	})
	rv.mu.Unlock()
	w.WriteHeader(rv.statuses[min(n, len(rv.statuses)-1)])
	_, _ = io.WriteString(w, "answer body")
}

func (rv *receiver) deliveries() []delivery {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]delivery(nil), rv.got...)
}

// loopback allows the test receivers, which listen on loopback addresses.
var loopback = outbound.Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}

func fastSender() *Sender {
	return &Sender{Outbound: &outbound.Client{Policy: loopback}, MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
}

func TestSendRetriesUntilSuccess(t *testing.T) {
	for _, failure := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		secret := NewSecret()
		rv := &receiver{secret: secret, statuses: []int{failure, http.StatusInternalServerError, http.StatusNoContent}}
		srv := httptest.NewServer(rv)
		payload := map[string]any{"type": "dataset.exported", "rows": 754}

		res, err := fastSender().Send(context.Background(), Endpoint{URL: srv.URL, Secret: secret}, "msg_42", payload)
		srv.Close()
		if err != nil {
			t.Fatalf("failure %d: Send: %v", failure, err)
		}
		if res.Attempts != 3 || res.StatusCode != http.StatusNoContent {
			t.Fatalf("failure %d: result %+v, want 3 attempts ending in 204", failure, res)
		}
		got := rv.deliveries()
		if len(got) != 3 {
			t.Fatalf("failure %d: receiver saw %d requests, want 3", failure, len(got))
		}
		for i, d := range got {
			if d.id != "msg_42" || d.contentType != "application/json" || d.verifyErr != nil {
				t.Errorf("failure %d: request %d: %+v", failure, i, d)
			}
			var decoded map[string]any
			if err := json.Unmarshal([]byte(d.body), &decoded); err != nil || decoded["type"] != "dataset.exported" || decoded["rows"] != 754.0 {
				t.Errorf("failure %d: request %d body %q", failure, i, d.body)
			}
		}
	}
}

func TestSendDoesNotRetryClientErrors(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusGone} {
		secret := NewSecret()
		rv := &receiver{secret: secret, statuses: []int{code, http.StatusOK}}
		srv := httptest.NewServer(rv)
		res, err := fastSender().Send(context.Background(), Endpoint{URL: srv.URL, Secret: secret}, "msg_1", map[string]int{"a": 1})
		srv.Close()
		var se *outbound.StatusError
		if !errors.As(err, &se) || se.Status != code || se.Body != "answer body" {
			t.Fatalf("%d: err = %v, want StatusError %d with the answer's body, for the log", code, err, code)
		}
		if res.Attempts != 1 || len(rv.deliveries()) != 1 {
			t.Fatalf("%d: %d attempts, receiver saw %d; want 1", code, res.Attempts, len(rv.deliveries()))
		}
	}
}

func TestSendGivesUpAfterMaxAttempts(t *testing.T) {
	secret := NewSecret()
	rv := &receiver{secret: secret, statuses: []int{http.StatusBadGateway}}
	srv := httptest.NewServer(rv)
	defer srv.Close()
	res, err := fastSender().Send(context.Background(), Endpoint{URL: srv.URL, Secret: secret}, "msg_1", "x")
	var se *outbound.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusBadGateway {
		t.Fatalf("err = %v, want StatusError 502", err)
	}
	if res.Attempts != 4 || len(rv.deliveries()) != 4 {
		t.Fatalf("%d attempts, receiver saw %d; want 4", res.Attempts, len(rv.deliveries()))
	}
}

// A connection dropped without an answer is a network error, and retried.
func TestSendRetriesNetworkErrors(t *testing.T) {
	secret := NewSecret()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	res, err := fastSender().Send(context.Background(), Endpoint{URL: srv.URL, Secret: secret}, "msg_1", "x")
	if err != nil || res.Attempts != 2 || res.StatusCode != http.StatusOK {
		t.Fatalf("Send = %+v, %v; want success on attempt 2", res, err)
	}
}

func TestSendStopsWhenContextEnds(t *testing.T) {
	secret := NewSecret()
	rv := &receiver{secret: secret, statuses: []int{http.StatusServiceUnavailable}}
	srv := httptest.NewServer(rv)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	s := &Sender{Outbound: &outbound.Client{Policy: loopback}, MaxAttempts: 10, BaseDelay: time.Hour}

	start := time.Now()
	res, err := s.Send(ctx, Endpoint{URL: srv.URL, Secret: secret}, "msg_1", "x")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	var se *outbound.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable {
		t.Fatalf("err = %v, want it to carry the last answer (503)", err)
	}
	if res.Attempts != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("%d attempts in %v; want 1, returning when the context ends", res.Attempts, time.Since(start))
	}
}

func TestSendRefusesBadInput(t *testing.T) {
	s := &Sender{}
	if _, err := s.Send(context.Background(), Endpoint{URL: "http://127.0.0.1:1", Secret: "whsec_short"}, "m", 1); !errors.Is(err, ErrInvalidSecret) {
		t.Fatalf("bad secret: err = %v", err)
	}
	if _, err := s.Send(context.Background(), Endpoint{URL: "http://127.0.0.1:1", Secret: NewSecret()}, "m", func() {}); err == nil {
		t.Fatal("unencodable payload: no error")
	}
	if _, err := s.Send(context.Background(), Endpoint{URL: "http://127.0.0.1:1", Secret: NewSecret()}, "", 1); err == nil {
		t.Fatal("empty id: no error")
	}
}

// Without an operator's permission a receiver on a loopback address is not
// called, by address or by a name that resolves to one, and the refusal is
// not retried.
func TestSendRefusesLoopback(t *testing.T) {
	secret := NewSecret()
	rv := &receiver{secret: secret, statuses: []int{http.StatusNoContent}}
	srv := httptest.NewServer(rv)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	for _, to := range []string{srv.URL, "http://localhost:" + u.Port() + "/hook"} {
		s := &Sender{MaxAttempts: 4, BaseDelay: time.Millisecond} // no Outbound: public addresses only
		res, err := s.Send(context.Background(), Endpoint{URL: to, Secret: secret}, "msg_1", "x")
		var refused *outbound.RefusedError
		if !errors.As(err, &refused) || res.Attempts != 1 {
			t.Fatalf("Send to %s = %+v, %v; want one refused attempt", to, res, err)
		}
		if d := outbound.Describe(err); !strings.Contains(d, "CURATE_OUTBOUND_ALLOW") {
			t.Errorf("Describe = %q", d)
		}
	}
	if n := len(rv.deliveries()); n != 0 {
		t.Fatalf("the refused receiver got %d requests", n)
	}
}

// A receiver allowed by name that redirects to an address the policy
// refuses is followed no further.
func TestSendRefusesARedirectToARefusedAddress(t *testing.T) {
	secret := NewSecret()
	rv := &receiver{secret: secret, statuses: []int{http.StatusNoContent}}
	target := httptest.NewServer(rv)
	defer target.Close()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer front.Close()
	fu, _ := url.Parse(front.URL)
	s := &Sender{Outbound: &outbound.Client{Policy: outbound.Policy{Hosts: []string{"localhost"}}}, MaxAttempts: 3, BaseDelay: time.Millisecond}
	res, err := s.Send(context.Background(), Endpoint{URL: "http://localhost:" + fu.Port(), Secret: secret}, "msg_1", "x")
	var refused *outbound.RefusedError
	if !errors.As(err, &refused) || res.Attempts != 1 {
		t.Fatalf("Send = %+v, %v; want one attempt, its redirect refused", res, err)
	}
	if n := len(rv.deliveries()); n != 0 {
		t.Fatalf("the redirect's target got %d requests", n)
	}
}

// What a failing receiver answers is kept for the log only.
func TestSendKeepsTheAnswerOutOfMessages(t *testing.T) {
	const marker = "REMOTE-BODY-MARKER-3b9e"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "stack trace: "+marker)
	}))
	defer srv.Close()
	_, err := fastSender().Send(context.Background(), Endpoint{URL: srv.URL, Secret: NewSecret()}, "msg_1", "x")
	var se *outbound.StatusError
	if !errors.As(err, &se) || !strings.Contains(se.Body, marker) {
		t.Fatalf("Send = %v, want a 500 keeping the body for the log", err)
	}
	if strings.Contains(err.Error(), marker) || strings.Contains(outbound.Describe(err), marker) {
		t.Errorf("the answer's body reached a message: %q", err)
	}
}
