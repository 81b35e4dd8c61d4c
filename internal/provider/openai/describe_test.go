package openai_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/provider/openai"
)

// A failed call to OpenAI reads as a sentence on a page: no Go error text
// (dial tcp, an address), and no body of a server error.
func TestFailuresReadAsSentences(t *testing.T) {
	const body = "upstream exploded at 10.1.2.3: stack trace follows"
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"` + body + `","type":"server_error"}}`))
	}))
	defer broken.Close()

	// A port that was listening a moment ago and no longer is: the
	// connection is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/v1/"
	_ = l.Close()

	for _, tc := range []struct {
		name, url, want string
	}{
		{"server error", broken.URL + "/v1/", "The provider could not get job: it answered 500 Internal Server Error."},
		{"refused", closed, "Curate could not get job at the provider. The server refused the connection."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := openai.New(openai.Config{APIKey: "sk-test", BaseURL: tc.url, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Poll(context.Background(), "ftjob-1", "")
			if err == nil {
				t.Fatal("the call succeeded")
			}
			got := outbound.Describe(err)
			if got != tc.want {
				t.Errorf("sentence %q, want %q (error: %v)", got, tc.want, err)
			}
			for _, raw := range []string{"dial tcp", "127.0.0.1", "exploded", "server_error"} {
				if strings.Contains(got, raw) {
					t.Errorf("sentence %q shows %q", got, raw)
				}
			}
		})
	}
}
