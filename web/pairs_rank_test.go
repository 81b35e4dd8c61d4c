package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/curate/curate/web/webtest"
)

// The ranking page's query field suggests, as the curator types, the
// organisation's queries holding the typed text in any case, and only
// those with two different answers or more to rank.
func TestPairRankSuggestions(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	acme, other := s.Org("acme"), s.Org("other")
	s.User(acme, "cu@acme.test", "curator")
	key, otherKey := s.APIKey(acme, "k", "curator"), s.APIKey(other, "k", "curator")
	post := func(key, query, response string) {
		s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": query, "response": response, "feedback_type": "thumbs_up"}).Must(t, http.StatusCreated)
	}
	for _, r := range []string{"Nine to five.", "Ten to six.", "Always open."} {
		post(key, "Opening hours?", r)
	}
	post(key, "Opening days?", "Monday to Friday.") // one answer: nothing to rank
	post(key, "Is the shop open on Sunday?", "Yes.")
	post(key, "is the SHOP open on sunday?", "yes.") // the same answer again, spelled otherwise
	post(key, "Refunds?", "Within 30 days.")
	post(key, "Refunds?", "Never.")
	post(otherKey, "Opening times?", "Eight to four.")
	post(otherKey, "Opening times?", "Noon to midnight.")

	c := s.SignedIn("cu@acme.test")
	page := c.Get("/pairs/rank").Must(t, http.StatusOK).Body
	for _, want := range []string{`list="rank-queries"`, `hx-get="/pairs/rank/queries"`, `<datalist id="rank-queries">`} {
		if !strings.Contains(page, want) {
			t.Errorf("the ranking page lacks %s", want)
		}
	}
	for _, tc := range []struct {
		typed     string
		want, not []string
	}{
		{"OPEN", []string{`<option value="Opening hours?">3 answers</option>`}, []string{"Opening days?", "Opening times?", "Sunday", "Refunds?"}},
		{"ing ho", []string{`value="Opening hours?"`}, []string{"Refunds?"}},
		{"refund", []string{`<option value="Refunds?">2 answers</option>`}, []string{"Opening"}},
		{"", []string{`value="Opening hours?"`, `value="Refunds?"`}, []string{"Opening days?", "Opening times?", "Sunday"}},
		{"100%_", nil, []string{"<option"}},
	} {
		got := c.Get("/pairs/rank/queries?query="+url.QueryEscape(tc.typed)).Must(t, http.StatusOK).Body
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("typing %q: no %s in\n%s", tc.typed, w, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("typing %q offers %s:\n%s", tc.typed, n, got)
			}
		}
	}
	// Most answers first.
	if got := c.Get("/pairs/rank/queries?query=").Body; strings.Index(got, "Opening hours?") > strings.Index(got, "Refunds?") {
		t.Errorf("suggestions not ordered by answers:\n%s", got)
	}
	c.Get("/pairs/rank/queries?query="+url.QueryEscape("a\x00b")).Must(t, http.StatusUnprocessableEntity)

	// Picking one loads its answers as the typed query always did.
	if got := c.Get("/pairs/rank?query="+url.QueryEscape("Opening hours?")).Must(t, http.StatusOK).Body; strings.Count(got, `name="rank_`) != 3 {
		t.Errorf("the picked query does not load its 3 answers")
	}
}

// The generation preview shows a sample of the new pairs and says so.
func TestPairPreviewSaysItIsASample(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cu@acme.test", "curator")
	key := s.APIKey(org, "k", "curator")
	// Five answers rated 5 to 1: every two of them differ, 10 pairs.
	for i, r := range []string{"A.", "B.", "C.", "D.", "E."} {
		s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "Opening hours?", "response": r, "feedback_type": "rating", "rating": 5 - i}).Must(t, http.StatusCreated)
	}
	s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "Refunds?", "response": "Yes.", "feedback_type": "rating", "rating": 5}).Must(t, http.StatusCreated)
	s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "Refunds?", "response": "No.", "feedback_type": "rating", "rating": 1}).Must(t, http.StatusCreated)
	c := s.SignedIn("cu@acme.test")
	prev := c.Get("/pairs/generate?preview=1&method=same_query&min_gap=1&per_query=10").Must(t, http.StatusOK).Body
	for _, want := range []string{"<strong>11 new pairs</strong> from 11 found", `id="preview-shown">A sample: 5 of 11 shown`, "Create 11 pairs"} {
		if !strings.Contains(prev, want) {
			t.Errorf("preview lacks %q:\n%s", want, regexpFind(t, `(?s)(<section id="preview".*?</section>)`, prev))
		}
	}
	// All new pairs fit: no sample note.
	prev = c.Get("/pairs/generate?preview=1&method=same_query&min_gap=4&per_query=10").Must(t, http.StatusOK).Body
	if !strings.Contains(prev, "<strong>2 new pairs</strong> from 2 found") || strings.Contains(prev, "preview-shown") {
		t.Errorf("a preview showing every new pair:\n%s", regexpFind(t, `(?s)(<section id="preview".*?</section>)`, prev))
	}
}
