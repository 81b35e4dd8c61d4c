package web_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/web/webtest"
)

// The audit log shows 50 entries a page, newest first; the "older" link
// carries the filter and a keyset cursor to the rest; a cursor of another
// list is refused naming the field.
func TestAuditPages(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	ctx := context.Background()
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	q := db.New(s.Pool)
	bot := audit.Actor{Kind: "api_key", Label: "nightly"}
	for i := 1; i <= 60; i++ {
		if err := audit.Record(ctx, q, bot, audit.Entry{OrgID: org, Action: "test.entry", TargetType: "n", TargetID: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	targets := func(body string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<td>N (\d+)</td>`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}

	admin := s.SignedIn("ada@acme.test")
	first := admin.Get("/admin/audit?actor=nightly").Must(t, http.StatusOK).Body
	got := targets(first)
	if len(got) != 50 || got[0] != "60" || got[49] != "11" {
		t.Fatalf("first page: %d entries from %v to %v, want 60 down to 11", len(got), got[0], got[len(got)-1])
	}
	next := html.UnescapeString(regexpFind(t, `<a href="([^"]+)" rel="next">`, first))
	if !strings.Contains(next, "actor=nightly") || !strings.Contains(next, "cursor=") {
		t.Fatalf("next page link %q does not keep the filter and a cursor", next)
	}
	second := admin.Get(next).Must(t, http.StatusOK).Body
	if got := targets(second); len(got) != 10 || got[0] != "10" || got[9] != "1" {
		t.Errorf("second page: %v, want 10 down to 1", got)
	}
	if strings.Contains(second, `rel="next"`) {
		t.Error("the last page links to a next one")
	}

	// An entry reads as words: its action labelled, its details as fields,
	// its target a link to the target's page.
	dataset := uuid.New().String()
	if err := audit.Record(ctx, q, audit.Actor{Kind: "user", Label: "ada@acme.test"}, audit.Entry{OrgID: org, Action: "dataset.export_finished",
		TargetType: "dataset", TargetID: dataset, Details: map[string]any{"base_model": "gpt-4o-mini", "format": "openai_chat"}}); err != nil {
		t.Fatal(err)
	}
	body := admin.Get("/admin/audit?action=dataset.export_finished").Must(t, http.StatusOK).Body
	for _, want := range []string{"<dt>Base model</dt><dd>gpt-4o-mini</dd>", "<dt>Format</dt><dd>OpenAI chat</dd>",
		"<td>Dataset export finished</td>", `<a href="/datasets/` + dataset + `">Dataset ` + dataset + `</a>`} {
		if !strings.Contains(body, want) {
			t.Errorf("audit entry lacks %s", want)
		}
	}
	if strings.Contains(body, "base_model") || strings.Contains(body, "openai_chat") {
		t.Error("audit entry shows raw JSON")
	}

	other := keyset.Cursor{At: time.Now(), ID: uuid.New()}.Encode(alerts.ListName)
	if res := admin.Get("/admin/audit?cursor="+other).Must(t, http.StatusUnprocessableEntity); !strings.Contains(res.Body, "cursor") {
		t.Error("a cursor of another list is refused without naming the field")
	}
}
