package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/curate/curate/web/webtest"
)

type ruleDoc struct {
	ID      string `json:"id"`
	Section string `json:"section"`
	Content string `json:"content"`
	Status  string `json:"status"`
	Helpful int    `json:"helpful"`
	Harmful int    `json:"harmful"`
	Neutral int    `json:"neutral"`
	Version int    `json:"version"`
}

type publishedDoc struct {
	Version     int       `json:"version"`
	ContentHash string    `json:"content_hash"`
	Rules       []ruleDoc `json:"rules"`
	Prompt      string    `json:"prompt"`
}

// The codebook API's contract: rules made (one from a corrected feedback
// item), published with a content hash, served with a prompt cut to a
// token budget and an ETag, retrieved by relevance, counted from feedback
// that names them (once per item), edited with If-Match, and exported then
// imported into another codebook with the same published hash.
func TestCodebookAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	curator := s.APIKey(org, "curation", "curator")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "assistant", "viewer")

	var item struct {
		ID string `json:"id"`
	}
	s.API(curator, http.MethodPost, "/api/feedback", map[string]any{"query": "Can I get a refund after 30 days?", "response": "Yes, always.",
		"feedback_type": "correction", "correction": "Refunds are possible within 14 days of purchase only."}).Must(t, http.StatusCreated).JSON(t, &item)

	var refund, other ruleDoc
	s.API(curator, http.MethodPost, "/api/codebooks/support/rules", map[string]any{"section": "billing",
		"content": "When asked about refunds, say they are possible within 14 days of purchase only.", "status": "active",
		"source_feedback_ids": []string{item.ID}}).Must(t, http.StatusCreated).JSON(t, &refund)
	if refund.ID == "" || refund.Section != "billing" || refund.Status != "active" || refund.Helpful != 0 {
		t.Fatalf("created %+v", refund)
	}
	s.API(curator, http.MethodPost, "/api/codebooks/support/rules", map[string]any{"section": "Accounts",
		"content": "To reset a password, point to Settings, Security, Reset password.", "status": "active"}).
		Must(t, http.StatusCreated).JSON(t, &other)
	s.API(curator, http.MethodPost, "/api/codebooks/support/rules", map[string]any{"section": "billing", "content": "A draft rule.", "status": "draft"}).
		Must(t, http.StatusCreated)
	var p problemDoc
	s.API(curator, http.MethodPost, "/api/codebooks/support/rules", map[string]any{"content": "", "status": "maybe", "source_feedback_ids": []string{"00000000-0000-0000-0000-000000000001"}}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "content,status" {
		t.Errorf("a bad rule named %q", p.fields())
	}
	s.API(viewer, http.MethodPost, "/api/codebooks/support/rules", map[string]any{"content": "x"}).Must(t, http.StatusForbidden)
	s.API(viewer, http.MethodGet, "/api/codebooks/support", nil).Must(t, http.StatusConflict) // nothing published yet

	// Publishing changes what the production assistant retrieves: only
	// admins publish.
	s.API(curator, http.MethodPost, "/api/codebooks/support/publish", nil).Must(t, http.StatusForbidden)
	var pub publishedDoc
	s.API(admin, http.MethodPost, "/api/codebooks/support/publish", nil).Must(t, http.StatusCreated).JSON(t, &pub)
	if pub.Version != 1 || len(pub.ContentHash) != 64 || len(pub.Rules) != 2 {
		t.Fatalf("published %+v", pub)
	}
	s.API(admin, http.MethodPost, "/api/codebooks/support/publish", nil).Must(t, http.StatusOK) // nothing changed

	res := s.API(viewer, http.MethodGet, "/api/codebooks/support?budget_tokens=1000", nil).Must(t, http.StatusOK)
	var got publishedDoc
	res.JSON(t, &got)
	if got.ContentHash != pub.ContentHash || !strings.Contains(got.Prompt, "## ACCOUNTS\n["+other.ID+"] helpful=0 harmful=0 :: To reset") ||
		!strings.Contains(got.Prompt, "## BILLING") {
		t.Errorf("served %+v", got)
	}
	small := publishedDoc{}
	s.API(viewer, http.MethodGet, "/api/codebooks/support?budget_tokens=70", nil).Must(t, http.StatusOK).JSON(t, &small)
	if strings.Contains(small.Prompt, "BILLING") || !strings.Contains(small.Prompt, "ACCOUNTS") {
		t.Errorf("a 70-token budget kept %q", small.Prompt)
	}
	etag := res.Header.Get("ETag")
	if r := s.Client().Do(http.MethodGet, "/api/codebooks/support?budget_tokens=1000", nil,
		http.Header{"Authorization": {"Bearer " + viewer}, "If-None-Match": {etag}}); r.Status != http.StatusNotModified {
		t.Errorf("polling with the ETag: %d", r.Status)
	}

	var found struct {
		Version int `json:"version"`
		Rules   []struct {
			ID    string  `json:"id"`
			Score float64 `json:"score"`
		} `json:"rules"`
	}
	s.API(viewer, http.MethodPost, "/api/codebooks/support/retrieve", map[string]any{"query": "Can I get a refund after 30 days?", "k": 5}).
		Must(t, http.StatusOK).JSON(t, &found)
	if found.Version != 1 || len(found.Rules) == 0 || found.Rules[0].ID != refund.ID || found.Rules[0].Score <= 0 {
		t.Errorf("retrieved %+v", found)
	}
	s.API(viewer, http.MethodPost, "/api/codebooks/support/retrieve", map[string]any{"query": strings.Repeat("q", 2001), "k": 0}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "query,k" {
		t.Errorf("a bad retrieve named %q", p.fields())
	}
	s.API(viewer, http.MethodPost, "/api/codebooks/nothing/retrieve", map[string]any{"query": "q"}).Must(t, http.StatusNotFound)

	// Feedback naming the rule: a thumbs-down counts as harmful, once.
	fb := map[string]any{"external_id": "fb-1", "query": "Refund?", "response": "Within 14 days.", "feedback_type": "thumbs_down",
		"codebook_rules": []string{refund.ID}}
	s.API(curator, http.MethodPost, "/api/feedback", fb).Must(t, http.StatusCreated)
	s.API(curator, http.MethodPost, "/api/feedback", fb).Must(t, http.StatusOK) // the same item again
	s.API(curator, http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "r", "feedback_type": "thumbs_up",
		"codebook_rules": []string{refund.ID, "00000000-0000-0000-0000-000000000002"}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "codebook_rules[1]" {
		t.Errorf("an unknown rule named %q", p.fields())
	}
	s.API(viewer, http.MethodGet, "/api/codebooks/support", nil).Must(t, http.StatusOK).JSON(t, &got)
	for _, r := range got.Rules {
		if r.ID == refund.ID && (r.Harmful != 1 || r.Helpful != 0) {
			t.Errorf("the rule's counters after one thumbs-down: %+v", r)
		}
	}

	// Two curators edit one rule: the second, stale, gets 409 with the text.
	edit := map[string]any{"section": "billing", "content": "Refunds: within 14 days of purchase, with the receipt.", "status": "active"}
	r := s.Client().Do(http.MethodPatch, "/api/codebooks/support/rules/"+refund.ID, strings.NewReader(mustJSON(t, edit)),
		http.Header{"Authorization": {"Bearer " + curator}, "Content-Type": {"application/json"}, "If-Match": {`W/"1"`}})
	if r.Status != http.StatusOK {
		t.Fatalf("first edit: %d %s", r.Status, r.Body)
	}
	r = s.Client().Do(http.MethodPatch, "/api/codebooks/support/rules/"+refund.ID, strings.NewReader(mustJSON(t, edit)),
		http.Header{"Authorization": {"Bearer " + curator}, "Content-Type": {"application/json"}, "If-Match": {`W/"1"`}})
	if r.Status != http.StatusConflict || !strings.Contains(r.Body, "with the receipt") {
		t.Errorf("stale edit: %d %s", r.Status, r.Body)
	}

	// Export, then import into a new codebook: the same published hash.
	s.API(admin, http.MethodPost, "/api/codebooks/support/publish", nil).Must(t, http.StatusCreated).JSON(t, &pub)
	text := s.API(viewer, http.MethodGet, "/api/codebooks/support/export", nil).Must(t, http.StatusOK).Body
	if !strings.HasPrefix(text, "## ACCOUNTS\n") {
		t.Errorf("export:\n%s", text)
	}
	bad := s.Client().Do(http.MethodPost, "/api/codebooks/copy/import", strings.NewReader("## BILLING\nnot a rule\n"),
		http.Header{"Authorization": {"Bearer " + admin}, "Content-Type": {"text/plain"}})
	if bad.Status != http.StatusUnprocessableEntity || !strings.Contains(bad.Body, "line 2") {
		t.Errorf("a malformed import: %d %s", bad.Status, bad.Body)
	}
	imported := s.Client().Do(http.MethodPost, "/api/codebooks/copy/import", strings.NewReader(text),
		http.Header{"Authorization": {"Bearer " + admin}, "Content-Type": {"text/plain"}})
	var again publishedDoc
	imported.Must(t, http.StatusCreated).JSON(t, &again)
	if again.ContentHash != pub.ContentHash {
		t.Errorf("import published %s, the export's source %s", again.ContentHash, pub.ContentHash)
	}
}

// The codebook in the pages: from a corrected item a curator makes a rule
// (the form shows the question, the answer and the correction), an admin
// publishes it (a curator's page says an admin publishes, and a curator's
// publish is refused), and the assistant's retrieve with the item's
// question returns it first; a thumbs-down naming it counts as harmful on
// the page.
func TestCodebookPages(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cu@acme.test", "curator")
	s.User(org, "vi@acme.test", "viewer")
	s.User(org, "ad@acme.test", "admin")
	curator, viewer, admin := s.SignedIn("cu@acme.test"), s.SignedIn("vi@acme.test"), s.SignedIn("ad@acme.test")
	key := s.APIKey(org, "assistant", "curator")
	var item struct {
		ID string `json:"id"`
	}
	s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "Does Tandem post meeting reminders in Slack?", "response": "No.",
		"feedback_type": "correction", "correction": "Yes: connect Slack under Settings, Integrations, and turn on reminders."}).
		Must(t, http.StatusCreated).JSON(t, &item)
	if body := curator.Get("/feedback/"+item.ID).Must(t, http.StatusOK).Body; !strings.Contains(body, `href="/codebooks?from=`+item.ID+`"`) {
		t.Error("the corrected item has no Make a rule link")
	}
	body := curator.Get("/codebooks/assistant?from="+item.ID).Must(t, http.StatusOK).Body
	if !strings.Contains(body, `id="rule-source"`) || !strings.Contains(body, "connect Slack under Settings") {
		t.Errorf("the rule form lacks its source: %s", body)
	}
	res := curator.PostForm("/codebooks/assistant/rules", url.Values{"section": {"integrations"}, "content": {""}, "status": {"active"},
		"source_feedback_id": {item.ID}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-content"`) {
		t.Errorf("an empty rule: %s", res.Body)
	}
	viewer.PostForm("/codebooks/assistant/rules", url.Values{"content": {"x"}}).Must(t, http.StatusForbidden)
	curator.PostForm("/codebooks/assistant/rules", url.Values{"section": {"integrations"}, "status": {"active"}, "source_feedback_id": {item.ID},
		"content": {"When asked about Slack reminders, say Tandem posts them once Slack is connected under Settings, Integrations."}}).
		Must(t, http.StatusSeeOther)
	page := curator.Get("/codebooks/assistant").Must(t, http.StatusOK).Body
	if strings.Contains(page, `id="publish-form"`) || !strings.Contains(page, `id="publish-admin-only"`) {
		t.Error("a curator's codebook page offers to publish")
	}
	curator.PostForm("/codebooks/assistant/publish", url.Values{}).Must(t, http.StatusForbidden)
	if page := admin.Get("/codebooks/assistant").Must(t, http.StatusOK).Body; !strings.Contains(page, `id="publish-form"`) {
		t.Error("an admin's codebook page has no Publish button")
	}
	admin.PostForm("/codebooks/assistant/publish", url.Values{}).Must(t, http.StatusSeeOther)
	var found struct {
		Rules []struct {
			ID string `json:"id"`
		} `json:"rules"`
	}
	s.API(key, http.MethodPost, "/api/codebooks/assistant/retrieve", map[string]any{"query": "Does Tandem post meeting reminders in Slack?", "k": 3}).
		Must(t, http.StatusOK).JSON(t, &found)
	if len(found.Rules) != 1 {
		t.Fatalf("retrieved %+v", found)
	}
	s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "Slack reminders?", "response": "Connect Slack first.",
		"feedback_type": "thumbs_down", "codebook_rules": []string{found.Rules[0].ID}}).Must(t, http.StatusCreated)
	body = viewer.Get("/codebooks/assistant").Must(t, http.StatusOK).Body
	row := body[strings.Index(body, `data-rule="`+found.Rules[0].ID+`"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `<td class="num">1</td>`) || !strings.Contains(row, "Review: as often harmful as helpful") {
		t.Errorf("the rule's row after a thumbs-down: %s", row)
	}
	if !strings.Contains(body, `data-version="1"`) || strings.Contains(body, `id="rule-form"`) {
		t.Error("the viewer's page: no version, or an edit form")
	}
}
