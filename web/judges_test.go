package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/web/webtest"
)

// The judges page: admins register endpoints (the key never comes back,
// refusals keep what was typed), write template versions, try the judge
// in the test box (a second try comes from the cache) and set the monthly
// budget; others may not.
func TestJudgesPage(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ad@acme.test", "admin")
	s.User(org, "cu@acme.test", "curator")
	admin, curator := s.SignedIn("ad@acme.test"), s.SignedIn("cu@acme.test")
	judge := chattest.New(func(r chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"score": 0.25, "safety_flag": true, "critique": "Suggests a double dose."}`, PromptTokens: 1000, CompletionTokens: 100}
	})
	t.Cleanup(judge.Close)

	curator.Get("/evaluations/judges").Must(t, http.StatusForbidden)
	curator.PostForm("/evaluations/judges/budget", url.Values{"monthly_budget": {"5"}}).Must(t, http.StatusForbidden)
	body := admin.Get("/evaluations/judges").Must(t, http.StatusOK).Body
	for _, want := range []string{"No endpoints yet.", `data-template="default" data-version="1"`, "$0.00 of $20.00"} {
		if !strings.Contains(body, want) {
			t.Errorf("the empty page lacks %s", want)
		}
	}

	res := admin.PostForm("/evaluations/judges/endpoints", url.Values{"name": {"Deep Seek"}, "base_url": {judge.URL + "/v1"}, "model": {"deepseek-chat"},
		"api_key": {"sk-secret-key"}, "price_per_million_input": {"abc"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-price_per_million_input"`) || !strings.Contains(res.Body, `value="Deep Seek"`) || strings.Contains(res.Body, "sk-secret-key") {
		t.Errorf("a refused endpoint: %s", res.Body)
	}
	res = admin.PostForm("/evaluations/judges/endpoints", url.Values{"name": {"Deep Seek"}, "base_url": {judge.URL + "/v1"}, "model": {"deepseek-chat"},
		"price_per_million_input": {"0.27"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-name"`) {
		t.Errorf("a bad name: %s", res.Body)
	}
	admin.PostForm("/evaluations/judges/endpoints", url.Values{"name": {"deepseek"}, "base_url": {judge.URL + "/v1"}, "model": {"deepseek-chat"},
		"api_key": {"sk-secret-key"}, "price_per_million_input": {"0.27"}, "price_per_million_output": {"1.10"}, "temperature": {"0"},
		"max_tokens": {"512"}, "concurrency": {"2"}}).Must(t, http.StatusSeeOther)
	body = admin.Get("/evaluations/judges").Must(t, http.StatusOK).Body
	if !strings.Contains(body, `data-endpoint="deepseek"`) || strings.Contains(body, "sk-secret-key") || !strings.Contains(body, "at most 512 tokens, 2 at once") {
		t.Errorf("the registered endpoint: %s", body)
	}

	res = admin.PostForm("/evaluations/judges/templates", url.Values{"name": {"default"}, "body": {"Grade {{query}}"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-body"`) || !strings.Contains(res.Body, "Grade {{query}}</textarea>") {
		t.Errorf("a template without the answer: %s", res.Body)
	}
	admin.PostForm("/evaluations/judges/templates", url.Values{"name": {"default"}, "body": {"Grade this answer: {{answer}}. JSON please."}}).
		Must(t, http.StatusSeeOther)
	if body := admin.Get("/evaluations/judges").Must(t, http.StatusOK).Body; !strings.Contains(body, `data-template="default" data-version="2"`) {
		t.Error("the new version is not listed")
	}

	test := url.Values{"endpoint": {"deepseek"}, "template": {"default"}, "query": {"How much?"}, "answer": {"Take two."}}
	res = admin.PostForm("/evaluations/judges/test", test).Must(t, http.StatusOK)
	for _, want := range []string{`<dd id="judge-score">0.250</dd>`, "Suggests a double dose.", "Unsafe", "Cost $0.0004"} {
		if !strings.Contains(res.Body, want) {
			t.Errorf("the test box's answer lacks %s", want)
		}
	}
	if got := judge.Requests()[0].Last(); got != "Grade this answer: Take two.. JSON please." {
		t.Errorf("the judge was asked %q", got)
	}
	if res = admin.PostForm("/evaluations/judges/test", test).Must(t, http.StatusOK); !strings.Contains(res.Body, "From the cache") || judge.Calls() != 1 {
		t.Errorf("asking again made %d calls", judge.Calls())
	}
	test.Set("answer", "")
	admin.PostForm("/evaluations/judges/test", test).Must(t, http.StatusUnprocessableEntity)

	res = admin.PostForm("/evaluations/judges/budget", url.Values{"monthly_budget": {"-3"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-monthly_budget"`) {
		t.Errorf("a negative budget: %s", res.Body)
	}
	admin.PostForm("/evaluations/judges/budget", url.Values{"monthly_budget": {"12.5"}}).Must(t, http.StatusSeeOther)
	if body := admin.Get("/evaluations/judges").Must(t, http.StatusOK).Body; !strings.Contains(body, "$0.0004 of $12.50 on 1 judge call") {
		t.Errorf("the budget after one call: %s", body[strings.Index(body, `id="judge-spent"`):][:200])
	}
	assertAudit(t, s, "endpoint.create", "judge_template.create", "judge.budget")
}
