package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/web/webtest"
)

// reflector is a stand-in judge endpoint answering the reflector prompt:
// a rule for the refund question, prose for the shipping one (not the
// asked JSON), and a rule for anything else.
func reflector(t *testing.T) *chattest.Server {
	r := chattest.New(func(r chattest.Request) chattest.Reply {
		p := r.Last()
		switch {
		case strings.Contains(p, "Question:\nCan I get a refund"):
			return chattest.Reply{Content: `{"section": "Billing", "rule": "When asked about refunds, say they are possible within 14 days of purchase only."}`}
		case strings.Contains(p, "Question:\nHow long does shipping"):
			return chattest.Reply{Content: "Here is a rule: ship faster."}
		}
		return chattest.Reply{Content: `{"section": "general", "rule": "Answer from the documentation."}`}
	})
	t.Cleanup(r.Close)
	return r
}

// count runs a counting query.
func count(t *testing.T, s *webtest.Server, sql string) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// patch sends a PATCH with If-Match.
func patch(t *testing.T, s *webtest.Server, key, path, version string, body any) webtest.Response {
	return s.Client().Do(http.MethodPatch, path, strings.NewReader(mustJSON(t, body)),
		http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "If-Match": {`"` + version + `"`}})
}

// pollFor reloads path until its body holds want.
func pollFor(t *testing.T, c *webtest.Client, path, want string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		body := c.Get(path).Must(t, http.StatusOK).Body
		if strings.Contains(body, want) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q: %s", path, want, body)
		}
	}
}

// Growing a codebook: the reflector drafts a rule from a correction (the
// form is filled, nothing is added until the curator does), a second ask
// of the same question reuses the answer without a call, an answer that is
// not a rule fails with its reason and is never a rule, bulk suggestions
// from a filter come to the review queue, a rule like an existing one is
// shown beside it to merge or keep, the token budget warns when the active
// rules would be cut, a published version shows its diff, and two
// curators editing one rule meet a 409 with the other's text.
func TestCodebookGrow(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 1})
	org := s.Org("acme")
	s.User(org, "cu@acme.test", "curator")
	s.User(org, "vi@acme.test", "viewer")
	curator, viewer := s.SignedIn("cu@acme.test"), s.SignedIn("vi@acme.test")
	key := s.APIKey(org, "ops", "admin")
	judge := reflector(t)

	post := func(q, answer, correction string) string {
		var item struct {
			ID string `json:"id"`
		}
		s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": q, "response": answer, "feedback_type": "correction",
			"correction": correction, "tags": []string{"billing"}}).Must(t, http.StatusCreated).JSON(t, &item)
		return item.ID
	}
	refund := post("Can I get a refund after 30 days?", "Yes, always.", "Refunds are possible within 14 days of purchase only.")
	shipping := post("How long does shipping take?", "A day.", "Five to seven working days.")

	// No endpoint yet: the editor says where one is registered (by an
	// administrator: no link a curator could not open).
	page := curator.Get("/codebooks/support?from="+refund).Must(t, http.StatusOK).Body
	if !strings.Contains(page, "on the judges page") || strings.Contains(page, `id="suggest-form"`) || strings.Contains(page, `href="/evaluations/judges"`) {
		t.Fatal("without an endpoint the editor offers a suggestion, or links a curator to the judges page")
	}
	s.API(key, http.MethodPost, "/api/endpoints", map[string]any{"name": "deepseek", "base_url": judge.URL + "/v1", "model": "deepseek-chat",
		"price_per_million_input": 1, "price_per_million_output": 2}).Must(t, http.StatusCreated)
	viewer.PostForm("/codebooks/support/suggestions", url.Values{"endpoint": {"deepseek"}, "feedback_id": {refund}}).Must(t, http.StatusForbidden)
	curator.PostForm("/codebooks/support/suggestions", url.Values{"endpoint": {"nobody"}, "feedback_id": {refund}}).
		Must(t, http.StatusUnprocessableEntity)

	// Make a rule: the reflector fills the form; nothing is added yet.
	res := curator.PostForm("/codebooks/support/suggestions", url.Values{"endpoint": {"deepseek"}, "feedback_id": {refund}}).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, "/codebooks/support?from="+refund) {
		t.Fatalf("suggesting sent to %q", loc)
	}
	page = pollFor(t, curator, "/codebooks/support?from="+refund, `data-suggestion="ready"`)
	if !strings.Contains(page, ">When asked about refunds, say they are possible within 14 days of purchase only.</textarea>") ||
		!strings.Contains(page, `name="section" value="billing"`) {
		t.Fatalf("the form lacks the suggestion: %s", page)
	}
	if n := count(t, s, `SELECT count(*) FROM codebook_rules`); n != 0 {
		t.Fatalf("a suggestion added %d rules by itself", n)
	}
	if n := count(t, s, `SELECT count(*) FROM judge_calls WHERE template = 'reflector' AND cost_micros > 0`); n != 1 {
		t.Errorf("%d costed reflector calls logged, want 1", n)
	}
	sid := regexp.MustCompile(`name="suggestion_id" value="([0-9a-f-]+)"`).FindStringSubmatch(page)
	if sid == nil {
		t.Fatal("no suggestion id in the form")
	}
	curator.PostForm("/codebooks/support/rules", url.Values{"section": {"billing"}, "status": {"active"}, "source_feedback_id": {refund},
		"suggestion_id": {sid[1]}, "content": {"When asked about refunds, say they are possible within 14 days of purchase only, and link the policy."}}).
		Must(t, http.StatusSeeOther)
	if st := count(t, s, `SELECT count(*) FROM codebook_suggestions WHERE status = 'accepted' AND rule_id IS NOT NULL`); st != 1 {
		t.Fatalf("%d suggestions accepted", st)
	}

	// The same question in another codebook costs nothing: the answer is
	// reused.
	calls := judge.Calls()
	curator.PostForm("/codebooks/other/suggestions", url.Values{"endpoint": {"deepseek"}, "feedback_id": {refund}}).Must(t, http.StatusSeeOther)
	pollFor(t, curator, "/codebooks/other?from="+refund, `data-suggestion="ready"`)
	if judge.Calls() != calls {
		t.Errorf("asking again called the reflector %d more times", judge.Calls()-calls)
	}

	// An answer that is not a rule fails with its reason, asked twice.
	curator.PostForm("/codebooks/support/suggestions", url.Values{"endpoint": {"deepseek"}, "feedback_id": {shipping}}).Must(t, http.StatusSeeOther)
	page = pollFor(t, curator, "/codebooks/support?from="+shipping, `data-suggestion="failed"`)
	if !strings.Contains(page, "The reflector&#39;s answer was not usable: not a JSON object with section and rule.") {
		t.Errorf("the failure is not worded: %s", page)
	}
	if !strings.Contains(page, `id="suggest-form"`) {
		t.Error("a failed suggestion cannot be asked again")
	}

	// Bulk: every corrected item tagged billing; the one already accepted
	// stays, the failed one is asked again.
	res = curator.PostForm("/codebooks/support/suggestions", url.Values{"endpoint": {"deepseek"}, "tag": {"billing"}}).Must(t, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/codebooks/support/suggestions?status=pending" {
		t.Fatalf("bulk suggesting sent to %q", loc)
	}
	// Wait for the failed suggestion in the list itself: the tab counts and
	// the list are read one after the other, while the job is running.
	queue := pollFor(t, curator, "/codebooks/support/suggestions?status=failed", `data-status="failed"`)
	if !strings.Contains(queue, "Accepted (1)") || !strings.Contains(queue, "Five to seven working days.") {
		t.Errorf("the review queue: %s", queue)
	}
	fid := regexp.MustCompile(`data-suggestion="([0-9a-f-]+)" data-status="failed"`).FindStringSubmatch(queue)
	if fid == nil {
		t.Fatal("no failed suggestion listed")
	}
	curator.PostForm("/codebooks/support/suggestions/"+fid[1]+"/dismiss", nil).Must(t, http.StatusSeeOther)
	curator.PostForm("/codebooks/support/suggestions/"+fid[1]+"/dismiss", nil).Must(t, http.StatusConflict)

	// A near-duplicate is shown beside the form; merging adds its source
	// to the existing rule, keeping both adds a second rule.
	like := url.Values{"section": {"billing"}, "status": {"active"}, "source_feedback_id": {shipping},
		"content": {"When asked about refunds, say they are possible within 14 days of purchase only."}}
	page = curator.PostForm("/codebooks/support/rules", like).Must(t, http.StatusOK).Body
	if !strings.Contains(page, `id="near-duplicates"`) || !strings.Contains(page, "% alike") {
		t.Fatalf("no near-duplicate shown: %s", page)
	}
	existing := regexp.MustCompile(`data-similar="([0-9a-f-]+)"`).FindStringSubmatch(page)[1]
	merge := url.Values{"merge_into": {existing}}
	for k, v := range like {
		merge[k] = v
	}
	curator.PostForm("/codebooks/support/rules", merge).Must(t, http.StatusSeeOther)
	if n := count(t, s, `SELECT cardinality(source_feedback_ids) FROM codebook_rules WHERE id = '`+existing+`'`); n != 2 {
		t.Errorf("merged rule has %d sources, want 2", n)
	}
	if n := count(t, s, `SELECT count(*) FROM codebook_rules`); n != 1 {
		t.Errorf("merging left %d rules", n)
	}
	like.Set("decision", "keep")
	curator.PostForm("/codebooks/support/rules", like).Must(t, http.StatusSeeOther)
	if n := count(t, s, `SELECT count(*) FROM codebook_rules WHERE codebook_id = (SELECT id FROM codebooks WHERE name = 'support')`); n != 2 {
		t.Errorf("keeping both left %d rules", n)
	}

	// The budget: 80 tokens hold one rule of the two (about 53 each).
	curator.PostForm("/codebooks/support/budget", url.Values{"budget_tokens": {"5"}}).Must(t, http.StatusUnprocessableEntity)
	curator.PostForm("/codebooks/support/budget", url.Values{"budget_tokens": {"80"}}).Must(t, http.StatusSeeOther)
	page = curator.Get("/codebooks/support").Must(t, http.StatusOK).Body
	if !strings.Contains(page, `id="budget-warning"`) || !strings.Contains(page, "the last 1 would be cut") {
		t.Errorf("no budget warning: %s", page)
	}

	// Versions: the second shows what changed.
	s.API(key, http.MethodPost, "/api/codebooks/support/publish", nil).Must(t, http.StatusCreated)
	var rules struct {
		Data []ruleDoc `json:"data"`
	}
	s.API(key, http.MethodGet, "/api/codebooks/support/rules", nil).Must(t, http.StatusOK).JSON(t, &rules)
	kept := rules.Data[0]
	patch(t, s, key, "/api/codebooks/support/rules/"+kept.ID, strconv.Itoa(kept.Version),
		map[string]any{"section": "billing", "status": "retired", "content": kept.Content}).Must(t, http.StatusOK)
	s.API(key, http.MethodPost, "/api/codebooks/support/rules", map[string]any{"section": "accounts", "status": "active",
		"content": "To reset a password, point to Settings, Security."}).Must(t, http.StatusCreated)
	s.API(key, http.MethodPost, "/api/codebooks/support/publish", nil).Must(t, http.StatusCreated)
	diff := curator.Get("/codebooks/support/versions/2").Must(t, http.StatusOK).Body
	if !strings.Contains(diff, "1 added, 0 changed, 1 removed, 1 unchanged") || !strings.Contains(diff, `data-removed="`+kept.ID+`"`) {
		t.Errorf("the diff: %s", diff)
	}
	curator.Get("/codebooks/support/versions/9").Must(t, http.StatusNotFound)

	// Two curators on one rule: the second save meets the first's text.
	other := rules.Data[1]
	rulePage := curator.Get("/codebooks/support/rules/"+other.ID).Must(t, http.StatusOK).Body
	version := regexp.MustCompile(`name="version" value="(\d+)"`).FindStringSubmatch(rulePage)[1]
	patch(t, s, key, "/api/codebooks/support/rules/"+other.ID, version,
		map[string]any{"section": "billing", "status": "active", "content": "Theirs."}).Must(t, http.StatusOK)
	page = curator.PostForm("/codebooks/support/rules/"+other.ID, url.Values{"version": {version}, "section": {"billing"}, "status": {"active"},
		"content": {"Mine."}}).Must(t, http.StatusConflict).Body
	if !strings.Contains(page, `id="rule-conflict"`) || !strings.Contains(page, "“Theirs.”") || !strings.Contains(page, ">Mine.</textarea>") {
		t.Errorf("the conflict page: %s", page)
	}
}
