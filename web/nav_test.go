package web_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/codebook"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/web/webtest"
)

// hrefRE finds the local links of a page.
var hrefRE = regexp.MustCompile(`<a\s[^>]*?href="(/[^"]*)"`)

// links are the local links of body (no static files), unescaped.
func links(body string) []string {
	var out []string
	for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
		l := html.UnescapeString(m[1])
		if !strings.HasPrefix(l, "/static/") {
			out = append(out, l)
		}
	}
	return out
}

// navLinks are the links of a page's top navigation.
func navLinks(t *testing.T, body string) []string {
	t.Helper()
	nav := regexpFind(t, `(?s)<nav class="tabs"[^>]*>(.*?)</nav>`, body)
	out := links(nav)
	sort.Strings(out)
	return out
}

// Each role sees in the navigation exactly the sections it may open, and
// every link on the pages it reaches from there opens for it: no 403 (nor
// any other refusal) behind a link shown. The expected sections are the
// roles' rights as the product grants them, written out here.
func TestNavLinksFollowRoles(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	ctx := context.Background()
	seeded, err := s.App.Demo.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Demo.SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	version, err := s.App.Demo.SeedDataset(ctx, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	org := seeded.OrgID
	storePairs(t, s, org, 3)
	newDataset(t, s, org, "Open pairs", "preference_pairs")
	v1, err := s.App.Services.Models.Register(ctx, audit.System, org, models.NewVersion{Name: "assist", ModelID: "assist-v1"})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := s.App.Services.Models.Register(ctx, audit.System, org, models.NewVersion{Name: "assist", ModelID: "assist-v2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Services.Experiments.Create(ctx, audit.System, org, experiments.NewExperiment{Key: "v1-v2", Name: "v1 against v2",
		ControlModelID: v1.ID, TreatmentModelID: v2.ID, Metrics: []string{"thumbs_up_rate"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Services.Codebooks.AddRule(ctx, audit.System, org, "assistant", codebook.NewRule{Section: "billing",
		Content: "Refunds are possible within 14 days.", Status: "active"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO evaluation_runs (org_id, golden_set_version_id, candidate_version_id, status, total, done, error, finished_at)
		VALUES ($1, $2, $3, 'failed', 4, 1, 'The endpoint answered 500.', now())`, org, version.ID, v1.ID); err != nil {
		t.Fatal(err)
	}

	everyone := []string{"/", "/alerts", "/codebooks", "/datasets", "/evaluations", "/experiments", "/feedback", "/fine-tuning", "/loops", "/models", "/monitors", "/pairs", "/shadows", "/stats"}
	want := map[string][]string{
		"viewer":  everyone,
		"curator": append(slices.Clone(everyone), "/imports"),
		"admin":   append(slices.Clone(everyone), "/imports", "/evaluations/judges", "/models/targets", "/admin/users", "/admin/api-keys", "/admin/audit"),
	}
	for _, role := range []string{"viewer", "curator", "admin"} {
		t.Run(role, func(t *testing.T) {
			s.User(org, role+"@demo.test", role)
			c := s.SignedIn(role + "@demo.test")
			home := c.Get("/").Must(t, http.StatusOK).Body
			nav := navLinks(t, home)
			exp := slices.Clone(want[role])
			sort.Strings(exp)
			if !slices.Equal(nav, exp) {
				t.Errorf("the navigation shows %v, want %v", nav, exp)
			}
			// Every link of the pages the navigation leads to opens, and so
			// does every link of the pages those lead to.
			from := map[string]string{}
			next := []string{}
			for _, page := range nav {
				from[page] = "the navigation"
				next = append(next, page)
			}
			checked := 0
			for depth := 0; depth < 3 && len(next) > 0; depth++ {
				var found []string
				for _, l := range next {
					res := c.Get(l)
					checked++
					if res.Status >= 400 {
						t.Errorf("%s links to %s, which answers a %s %d", from[l], l, role, res.Status)
						continue
					}
					if depth == 2 {
						continue
					}
					for _, m := range links(res.Body) {
						if _, ok := from[m]; !ok {
							from[m] = l
							found = append(found, m)
						}
					}
				}
				next = found
			}
			if checked < 150 {
				t.Errorf("only %d links were followed: the pages are too empty to tell", checked)
			}
			t.Logf("%d links followed", checked)
		})
	}
}

// "/feedback?assignee=me" is the signed-in user's queue, for whoever
// follows it: Judge conflicts' "My queue" and a shared link both land on
// one's own items, with "My queue" current. An API key is nobody, and is
// told to send an id.
func TestFeedbackQueueAssigneeMe(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	me := s.User(org, "cu@acme.test", "curator")
	colleague := s.User(org, "co@acme.test", "curator")
	key := s.APIKey(org, "k", "curator")
	ids := map[string]string{}
	for _, q := range []string{"mine", "theirs", "nobody's"} {
		var fb struct {
			ID string `json:"id"`
		}
		s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "Whose is " + q + "?", "response": "Answer.", "feedback_type": "thumbs_up"}).
			Must(t, http.StatusCreated).JSON(t, &fb)
		ids[q] = fb.ID
	}
	for q, who := range map[string]any{"mine": me, "theirs": colleague} {
		if _, err := s.Pool.Exec(context.Background(), `UPDATE feedback SET assignee_id = $1 WHERE id = $2`, who, ids[q]); err != nil {
			t.Fatal(err)
		}
	}

	c := s.SignedIn("cu@acme.test")
	conflicts := c.Get("/feedback/conflicts").Must(t, http.StatusOK).Body
	if !strings.Contains(conflicts, `href="/feedback?assignee=me"`) {
		t.Fatalf("Judge conflicts does not link to /feedback?assignee=me")
	}
	queue := c.Get("/feedback?assignee=me").Must(t, http.StatusOK).Body
	for q, id := range ids {
		if listed := strings.Contains(queue, `data-item="`+id+`"`); listed != (q == "mine") {
			t.Errorf("my queue lists %s's item: %v", q, listed)
		}
	}
	if !strings.Contains(queue, `id="my-queue" aria-current="page"`) {
		t.Error(`"My queue" is not the current view of /feedback?assignee=me`)
	}
	counts := c.Get("/feedback/counts?assignee=me").Must(t, http.StatusOK).Body
	if got := regexpFind(t, `(?s)data-status="pending".*?class="num">(\d+)<`, counts); got != "1" {
		t.Errorf("my queue counts %s pending, want 1: %s", got, counts)
	}
	// The colleague's own queue, from the same link.
	other := s.SignedIn("co@acme.test").Get("/feedback?assignee=me").Must(t, http.StatusOK).Body
	if !strings.Contains(other, ids["theirs"]) || strings.Contains(other, ids["mine"]) {
		t.Error("the same link does not open the colleague's own queue")
	}
	// The JSON list reads it the same for a session, and refuses it for a
	// key, which is no user.
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	c.Get("/api/feedback?assignee=me").Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != ids["mine"] {
		t.Errorf("GET /api/feedback?assignee=me in a session: %+v", list.Data)
	}
	res := s.API(key, http.MethodGet, "/api/feedback?assignee=me", nil).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `"field":"assignee"`) || !strings.Contains(res.Body, "send a user id") {
		t.Errorf("an API key's assignee=me: %s", res.Body)
	}
	// A word that is neither an id nor "me" is still refused.
	c.Get("/feedback?assignee=you").Must(t, http.StatusUnprocessableEntity)
}
