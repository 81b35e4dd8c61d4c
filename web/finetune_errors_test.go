package web_test

import (
	"context"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/provider/openai"
	"github.com/curate/curate/web/webtest"
)

// A job that fails because OpenAI could not be reached, or answered a
// server error, says so in a sentence on its page: never the Go error
// (dial tcp, the address) nor the body the server sent.
func TestFineTuneFailureReadsAsASentence(t *testing.T) {
	t.Parallel()
	const body = "upstream exploded: stack trace follows"
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"` + body + `","type":"server_error"}}`))
	}))
	defer broken.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/v1/"
	_ = l.Close()

	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ad@acme.test", "admin")
	c := s.SignedIn("ad@acme.test")
	for _, tc := range []struct {
		name, url, want string
	}{
		{"server error", broken.URL + "/v1/", "The provider could not get job: it answered 500 Internal Server Error."},
		{"refused", closed, "Curate could not get job at the provider. The server refused the connection."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var id uuid.UUID
			if err := s.Pool.QueryRow(context.Background(), `INSERT INTO fine_tuning_jobs (org_id, dataset_version_id, dataset_label, dataset_kind,
				provider, base_model, method, export_format, status, train_examples, estimated_tokens, estimated_epochs, price_per_million,
				price_date, estimated_cost) VALUES ($1, gen_random_uuid(), 'd v1', 'preference', 'openai', 'gpt-4.1-mini', 'dpo',
				'openai_preference', 'running', 10, 1000, 1, 1, '2025-01-01', 1) RETURNING id`, org).Scan(&id); err != nil {
				t.Fatal(err)
			}
			// The call the worker makes, through the same client, and the
			// worker's last word on a job out of retries.
			p, err := openai.New(openai.Config{APIKey: "sk-test", BaseURL: tc.url, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, callErr := p.Poll(context.Background(), "ftjob-1", "")
			if callErr == nil {
				t.Fatal("the call succeeded")
			}
			if err := s.App.FineTune.Fail(context.Background(), id, callErr); err != nil {
				t.Fatal(err)
			}
			page := html.UnescapeString(c.Get("/fine-tuning/jobs/"+id.String()).Must(t, http.StatusOK).Body)
			if got := regexpFind(t, `(?s)id="ft-error" role="alert">(.*?)</p>`, page); got != tc.want {
				t.Errorf("the page says %q, want %q", got, tc.want)
			}
			for _, raw := range []string{"dial tcp", l.Addr().String(), "exploded", "server_error"} {
				if strings.Contains(page, raw) {
					t.Errorf("the page shows %q", raw)
				}
			}
		})
	}
}
