package web_test

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/web/webtest"
)

// reviewsDoc is GET /api/feedback/:id/reviews.
type reviewsDoc struct {
	Data []struct {
		Reviewer struct {
			Email string `json:"email"`
		} `json:"reviewer"`
		Status string `json:"status"`
		Note   string `json:"note"`
	} `json:"data"`
	Mine *struct {
		Status string `json:"status"`
	} `json:"mine"`
	State         string   `json:"state"`
	Overlap       int      `json:"overlap"`
	Submitted     int      `json:"submitted"`
	Hidden        int      `json:"hidden"`
	Disagreements []string `json:"disagreements"`
}

// sessionJSON calls the API as a signed-in browser tab does: its cookie and
// the CSRF token of its last page.
func sessionJSON(c *webtest.Client, method, path, body string) webtest.Response {
	h := http.Header{"Content-Type": {"application/json"}, "X-CSRF-Token": {c.CSRF()}}
	var r *strings.Reader
	if body != "" {
		r = strings.NewReader(body)
	} else {
		r = strings.NewReader("")
	}
	return c.Do(method, path, r, h)
}

// reviewPanel is the item page's overlapping review panel.
func reviewPanel(body string) string {
	i := strings.Index(body, `id="item-review"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], "</section>")
	if j < 0 {
		return body[i:]
	}
	return body[i : i+j]
}

// tagged stores pending items with one tag, oldest first.
func tagged(t *testing.T, s *webtest.Server, org uuid.UUID, tag string, n int) []uuid.UUID {
	t.Helper()
	items := make([]feedback.Item, n)
	for i := range items {
		items[i] = feedback.Item{Query: tag + " question " + string(rune('a'+i)), Response: tag + " answer " + string(rune('a'+i)),
			FeedbackType: "thumbs_down", Tags: []string{tag}}
	}
	return ingest(t, s, org, items...)
}

// Overlapping review over HTTP: an admin asks for two reviews on a tag;
// the first curator's next item is the oldest, reviewed with the queue's
// verdict buttons gone; the second curator reads neither the first's label
// nor who gave it, on the page or in the API, until they submit theirs;
// the disagreement goes to adjudication, where a curator who is not named
// cannot decide and a named one must give a note; the agreement API and
// page show the pair's kappa with its counts.
func TestOverlappingReviewOverHTTP(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	s.User(org, "cara@acme.test", "curator")
	s.User(org, "dan@acme.test", "curator")
	sam := s.User(org, "sam@acme.test", "curator")
	s.User(org, "vic@acme.test", "viewer")
	key := s.APIKey(org, "notebook", "viewer")
	ids := tagged(t, s, org, "expert", 5)
	ctx := context.Background()

	admin := s.SignedIn("ada@acme.test")
	admin.Get("/review").Must(t, http.StatusOK)
	// A refused plan keeps what was typed and says why.
	bad := admin.PostForm("/review/plans", url.Values{"scope": {"tag"}, "tag": {"expert"}, "overlap": {"1"},
		"rating_tolerance": {"1"}, "dimension_tolerance": {"1"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(bad.Body, `id="err-overlap"`) {
		t.Error("an overlap of 1 is not refused beside its field")
	}
	admin.PostForm("/review/plans", url.Values{"scope": {"tag"}, "tag": {"expert"}, "overlap": {"2"},
		"rating_tolerance": {"1"}, "dimension_tolerance": {"1"}}).Must(t, http.StatusSeeOther)
	var plan uuid.UUID
	if err := s.Pool.QueryRow(ctx, "SELECT id FROM review_plans WHERE tag = 'expert'").Scan(&plan); err != nil {
		t.Fatal(err)
	}
	home := admin.Get("/review").Must(t, http.StatusOK)
	if !strings.Contains(home.Body, "Tag “expert”") || !strings.Contains(home.Body, `data-reviews="0">`+"\n") && !strings.Contains(home.Body, `data-reviews="0"`) {
		t.Error("the plan and its progress are not on the page")
	}

	cara := s.SignedIn("cara@acme.test")
	cara.Get("/review")
	next := cara.PostForm("/review/plans/"+plan.String()+"/next", nil).Must(t, http.StatusSeeOther)
	loc := next.Header.Get("Location")
	if !strings.HasPrefix(loc, "/feedback/"+ids[0].String()) {
		t.Fatalf("cara's first item is %s, want the oldest, %s", loc, ids[0])
	}
	page := cara.Get(loc).Must(t, http.StatusOK)
	for _, want := range []string{`id="review-form"`, "0 of 2 reviews in"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("cara's item page lacks %s", want)
		}
	}
	if strings.Contains(page.Body, `id="approve"`) || strings.Contains(page.Body, `id="save-correction"`) {
		t.Error("the queue's verdict forms are offered on an item under overlapping review")
	}
	// A label with no verdict is refused beside the field, nothing kept.
	cara.PostForm("/feedback/"+ids[0].String()+"/review", url.Values{"note": {"hmm"}}).Must(t, http.StatusUnprocessableEntity)
	cara.PostForm("/feedback/"+ids[0].String()+"/review", url.Values{"status": {"approved"}, "rating": {"4"}, "note": {"CARA-PRIVATE-NOTE"}}).
		Must(t, http.StatusSeeOther)

	dan := s.SignedIn("dan@acme.test")
	page = dan.Get("/feedback/"+ids[0].String()).Must(t, http.StatusOK)
	// Who reviewed is hidden too (the page lists every user elsewhere, in
	// the assignment form: look in the review panel).
	if panel := reviewPanel(page.Body); strings.Contains(page.Body, "CARA-PRIVATE-NOTE") || strings.Contains(panel, "cara@acme.test") ||
		strings.Contains(page.Body, `id="review-labels"`) || panel == "" {
		t.Error("dan's page shows cara's label before dan has submitted")
	}
	if !strings.Contains(page.Body, `id="review-blind"`) || !strings.Contains(page.Body, "1 review is in") {
		t.Error("dan's page does not say a review is hidden")
	}
	var doc reviewsDoc
	sessionJSON(dan, http.MethodGet, "/api/feedback/"+ids[0].String()+"/reviews", "").Must(t, http.StatusOK).JSON(t, &doc)
	if len(doc.Data) != 0 || doc.Hidden != 1 || doc.Mine != nil || doc.State != "open" {
		t.Errorf("dan reads through the API: %+v", doc)
	}
	for _, reader := range []func() webtest.Response{
		func() webtest.Response {
			return s.API(key, http.MethodGet, "/api/feedback/"+ids[0].String()+"/reviews", nil)
		},
		func() webtest.Response {
			return sessionJSON(s.SignedIn("vic@acme.test"), http.MethodGet, "/api/feedback/"+ids[0].String()+"/reviews", "")
		},
	} {
		var d reviewsDoc
		reader().Must(t, http.StatusOK).JSON(t, &d)
		if len(d.Data) != 0 || d.Hidden != 1 || strings.Contains(reader().Body, "CARA-PRIVATE-NOTE") {
			t.Errorf("a key or a viewer reads an open item's reviews: %+v", d)
		}
	}
	// A key gives no review of its own.
	s.API(s.APIKey(org, "writer", "curator"), http.MethodPost, "/api/feedback/"+ids[0].String()+"/reviews", map[string]any{"status": "approved"}).
		Must(t, http.StatusForbidden)
	// Dan submits through the API and reads both reviews in its answer.
	res := sessionJSON(dan, http.MethodPost, "/api/feedback/"+ids[0].String()+"/reviews", `{"status": "rejected", "note": "the date is wrong"}`).
		Must(t, http.StatusCreated)
	res.JSON(t, &doc)
	if len(doc.Data) != 2 || doc.Hidden != 0 || doc.State != "disputed" || !strings.Contains(res.Body, "CARA-PRIVATE-NOTE") ||
		len(doc.Disagreements) != 1 || doc.Disagreements[0] != "status" {
		t.Errorf("after submitting, dan reads %+v", doc)
	}
	var status string
	if err := s.Pool.QueryRow(ctx, "SELECT status::text FROM feedback WHERE id = $1", ids[0]).Scan(&status); err != nil || status != "pending" {
		t.Errorf("the disputed item is %s (%v), want pending", status, err)
	}

	// The other four items: both approve the first two and the fourth,
	// both reject the third. Statuses cara A A A R A, dan R A A R A.
	for i, st := range []string{"approved", "approved", "rejected", "approved"} {
		for _, c := range []*webtest.Client{cara, dan} {
			c.Get("/feedback/" + ids[i+1].String())
			c.PostForm("/feedback/"+ids[i+1].String()+"/review", url.Values{"status": {st}}).Must(t, http.StatusSeeOther)
		}
	}
	if err := s.Pool.QueryRow(ctx, "SELECT status::text FROM feedback WHERE id = $1", ids[3]).Scan(&status); err != nil || status != "rejected" {
		t.Errorf("an item both rejected is %s (%v)", status, err)
	}
	// Nothing is left for cara, on the page or in the API; a key takes no
	// item.
	cara.Get("/review")
	if loc := cara.PostForm("/review/plans/"+plan.String()+"/next", nil).Must(t, http.StatusSeeOther).Header.Get("Location"); loc != "/review" {
		t.Errorf("with every item reviewed, next goes to %s", loc)
	}
	sessionJSON(cara, http.MethodPost, "/api/review/plans/"+plan.String()+"/next", "").Must(t, http.StatusNoContent)
	s.API(s.APIKey(org, "taker", "curator"), http.MethodPost, "/api/review/plans/"+plan.String()+"/next", nil).Must(t, http.StatusForbidden)
	var plans struct {
		Data []struct {
			ID       uuid.UUID `json:"id"`
			Overlap  int       `json:"overlap"`
			Progress struct {
				Reviews  []int `json:"reviews"`
				Agreed   int   `json:"agreed"`
				Disputed int   `json:"disputed"`
			} `json:"progress"`
		} `json:"data"`
	}
	s.API(key, http.MethodGet, "/api/review/plans", nil).Must(t, http.StatusOK).JSON(t, &plans)
	if len(plans.Data) != 1 || plans.Data[0].ID != plan || plans.Data[0].Overlap != 2 ||
		!slices.Equal(plans.Data[0].Progress.Reviews, []int{0, 0, 5}) || plans.Data[0].Progress.Agreed != 4 || plans.Data[0].Progress.Disputed != 1 {
		t.Errorf("plans: %+v", plans)
	}

	// Adjudication: cara is not named, so she reads the item and cannot
	// decide; viewers do not reach the tab.
	tab := cara.Get("/review/adjudication").Must(t, http.StatusOK)
	if !strings.Contains(tab.Body, `data-dispute="`+ids[0].String()+`"`) || strings.Contains(tab.Body, `id="decide-`) {
		t.Error("cara's adjudication tab does not list the dispute, or offers her the decision")
	}
	if !strings.Contains(tab.Body, "CARA-PRIVATE-NOTE") || !strings.Contains(tab.Body, "the date is wrong") {
		t.Error("the reviews are not side by side on the adjudication tab")
	}
	cara.PostForm("/review/adjudication/"+ids[0].String(), url.Values{"status": {"approved"}, "note": {"mine"}}).Must(t, http.StatusForbidden)
	s.SignedIn("vic@acme.test").Get("/review/adjudication").Must(t, http.StatusForbidden)
	admin.Get("/review")
	admin.PostForm("/review/adjudicators", url.Values{"user_id": {sam.String()}}).Must(t, http.StatusSeeOther)
	samC := s.SignedIn("sam@acme.test")
	tab = samC.Get("/review/adjudication").Must(t, http.StatusOK)
	if !strings.Contains(tab.Body, `id="decide-`+ids[0].String()+`"`) {
		t.Fatal("a named adjudicator is not offered the decision")
	}
	refused := samC.PostForm("/review/adjudication/"+ids[0].String(), url.Values{"status": {"approved"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(refused.Body, `id="err-note"`) {
		t.Error("a decision without a note is not refused beside the note")
	}
	samC.PostForm("/review/adjudication/"+ids[0].String(), url.Values{"status": {"approved"}, "note": {"the date is the release date"}}).
		Must(t, http.StatusSeeOther)
	if err := s.Pool.QueryRow(ctx, "SELECT status::text FROM feedback WHERE id = $1", ids[0]).Scan(&status); err != nil || status != "approved" {
		t.Errorf("the decided item is %s (%v)", status, err)
	}
	if n := auditCount(t, s, "review.adjudicate", ids[0].String()); n != 1 {
		t.Errorf("%d review.adjudicate entries", n)
	}
	if decided := samC.Get("/review/adjudication?decided=1").Must(t, http.StatusOK); !strings.Contains(decided.Body, "the date is the release date") {
		t.Error("the decided tab does not show the decision's note")
	}

	// Agreement: cara A A A R A against dan R A A R A. By hand, Cohen's
	// kappa: p_o = 4/5, p_e = 4/5·3/5 + 1/5·2/5 = 14/25, kappa =
	// (0.8 - 0.56) / 0.44 = 0.5455.
	var agreement struct {
		Items int `json:"items"`
		Data  []struct {
			Kind  string `json:"kind"`
			Pairs []struct {
				Kappa struct {
					Value *float64 `json:"value"`
					Units int      `json:"units"`
				} `json:"cohen_kappa"`
				Agreed int `json:"agreed"`
			} `json:"pairs"`
		} `json:"data"`
	}
	s.API(key, http.MethodGet, "/api/agreement?tag=expert&kind=status", nil).Must(t, http.StatusOK).JSON(t, &agreement)
	if agreement.Items != 5 || len(agreement.Data) != 1 || len(agreement.Data[0].Pairs) != 1 {
		t.Fatalf("agreement: %+v", agreement)
	}
	p := agreement.Data[0].Pairs[0]
	if p.Kappa.Value == nil || math.Abs(*p.Kappa.Value-0.24/0.44) > 1e-9 || p.Kappa.Units != 5 || p.Agreed != 4 {
		t.Errorf("cara and dan: kappa %v over %d items, %d alike; want 0.5455 over 5, 4 alike", p.Kappa.Value, p.Kappa.Units, p.Agreed)
	}
	s.API(key, http.MethodGet, "/api/agreement?tag=expert&kind=colour", nil).Must(t, http.StatusUnprocessableEntity)
	s.API(key, http.MethodGet, "/api/agreement?tags=expert", nil).Must(t, http.StatusBadRequest)
	page = s.SignedIn("vic@acme.test").Get("/review/agreement?tag=expert").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "0.545") || !strings.Contains(page.Body, `<td class="num pair-units">5</td>`) {
		t.Error("the agreement page does not show the pair's kappa with its count")
	}

	// Another organisation sees none of it.
	other := s.Org("other")
	s.User(other, "olga@other.test", "admin")
	olga := s.SignedIn("olga@other.test")
	sessionJSON(olga, http.MethodGet, "/api/feedback/"+ids[0].String()+"/reviews", "").Must(t, http.StatusNotFound)
	olga.Get("/review")
	olga.PostForm("/review/plans/"+plan.String()+"/next", nil).Must(t, http.StatusNotFound)
}

// A dataset that takes agreed items only leaves out members whose
// overlapping review is disputed or still open, and its validation report
// and frozen version say how many; one that takes every item keeps them.
// Pair generation leaves out pairs of such items the same way.
func TestAgreedOnlyDatasetsAndPairs(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cara@acme.test", "curator")
	s.User(org, "dan@acme.test", "curator")
	adminKey := s.APIKey(org, "ops", "admin")
	ids := tagged(t, s, org, "gold", 3)

	// Reviewed the queue's way before any plan: two approved, one corrected.
	cara := s.SignedIn("cara@acme.test")
	for i, id := range ids {
		cara.Get("/feedback/" + id.String())
		if i == 2 {
			cara.PostForm("/feedback/"+id.String()+"/correction", url.Values{"version": {"1"}, "correction": {"a better answer"}}).Must(t, http.StatusSeeOther)
		} else {
			cara.PostForm("/feedback/"+id.String()+"/status", url.Values{"version": {"1"}, "status": {"approved"}}).Must(t, http.StatusSeeOther)
		}
	}
	var before struct {
		ID         string `json:"id"`
		AgreedOnly bool   `json:"agreed_only"`
	}
	s.API(adminKey, http.MethodPost, "/api/training-datasets", map[string]any{"name": "every item", "dataset_type": "instruction_tuning"}).
		Must(t, http.StatusCreated).JSON(t, &before)
	if before.AgreedOnly {
		t.Error("a dataset made without overlapping review takes agreed items only")
	}
	s.API(adminKey, http.MethodPost, "/api/review/plans", map[string]any{"tag": "gold", "overlap": 2}).Must(t, http.StatusCreated)
	var after struct {
		ID         string `json:"id"`
		AgreedOnly bool   `json:"agreed_only"`
	}
	s.API(adminKey, http.MethodPost, "/api/training-datasets", map[string]any{"name": "agreed only", "dataset_type": "instruction_tuning"}).
		Must(t, http.StatusCreated).JSON(t, &after)
	if !after.AgreedOnly {
		t.Error("a dataset made while overlap is set does not take agreed items only")
	}
	for _, d := range []string{before.ID, after.ID} {
		s.API(adminKey, http.MethodPost, "/api/training-datasets/"+d+"/members", map[string]any{"add": ids}).Must(t, http.StatusOK)
	}
	// Item 0 agreed, item 1 disputed, item 2 waiting for its second review.
	dan := s.SignedIn("dan@acme.test")
	for i, st := range []string{"approved", "approved", "corrected"} {
		cara.Get("/feedback/" + ids[i].String())
		form := url.Values{"status": {st}}
		if st == "corrected" {
			form.Set("correction", "a better answer")
		}
		cara.PostForm("/feedback/"+ids[i].String()+"/review", form).Must(t, http.StatusSeeOther)
	}
	for i, st := range []string{"approved", "rejected"} {
		dan.Get("/feedback/" + ids[i].String())
		dan.PostForm("/feedback/"+ids[i].String()+"/review", url.Values{"status": {st}}).Must(t, http.StatusSeeOther)
	}

	type leftOut struct {
		Disagreement    int `json:"disagreement"`
		AwaitingReviews int `json:"awaiting_reviews"`
	}
	var report struct {
		LeftOut leftOut `json:"left_out"`
		Report  struct {
			Examples int `json:"examples"`
		} `json:"report"`
	}
	s.API(adminKey, http.MethodGet, "/api/training-datasets/"+after.ID+"/validation", nil).Must(t, http.StatusOK).JSON(t, &report)
	if report.LeftOut != (leftOut{1, 1}) || report.Report.Examples != 1 {
		t.Errorf("agreed-only report: left out %+v, %d examples; want 1 disputed, 1 open, 1 example", report.LeftOut, report.Report.Examples)
	}
	s.API(adminKey, http.MethodGet, "/api/training-datasets/"+before.ID+"/validation", nil).Must(t, http.StatusOK).JSON(t, &report)
	if report.LeftOut != (leftOut{}) || report.Report.Examples != 3 {
		t.Errorf("every-item report: left out %+v, %d examples", report.LeftOut, report.Report.Examples)
	}
	page := cara.Get("/datasets/"+after.ID).Must(t, http.StatusOK)
	if !strings.Contains(page.Body, `id="report-left-out"`) || !strings.Contains(page.Body, "1 item whose reviewers disagree") {
		t.Error("the dataset page's report does not say what it left out")
	}
	var frozen struct {
		Current struct {
			ItemCount int     `json:"item_count"`
			LeftOut   leftOut `json:"left_out"`
		} `json:"current_version"`
	}
	s.API(adminKey, http.MethodPatch, "/api/training-datasets/"+after.ID, map[string]any{"status": "ready"}).Must(t, http.StatusOK).JSON(t, &frozen)
	if frozen.Current.ItemCount != 1 || frozen.Current.LeftOut != (leftOut{1, 1}) {
		t.Errorf("agreed-only version: %+v", frozen.Current)
	}
	s.API(adminKey, http.MethodPatch, "/api/training-datasets/"+before.ID, map[string]any{"status": "ready"}).Must(t, http.StatusOK).JSON(t, &frozen)
	if frozen.Current.ItemCount != 3 {
		t.Errorf("every-item version holds %d items, want 3", frozen.Current.ItemCount)
	}

	// Pairs: item 2's correction makes a pair, left out while its review
	// is open, unless every item is asked for.
	var preview struct {
		Candidates int  `json:"candidates"`
		LeftOut    int  `json:"left_out"`
		AgreedOnly bool `json:"agreed_only"`
	}
	s.API(adminKey, http.MethodPost, "/api/preference-pairs/bulk", map[string]any{"method": "correction", "dry_run": true}).
		Must(t, http.StatusOK).JSON(t, &preview)
	if !preview.AgreedOnly || preview.Candidates != 0 || preview.LeftOut != 1 {
		t.Errorf("agreed-only preview: %+v; want 0 candidates, 1 left out", preview)
	}
	s.API(adminKey, http.MethodPost, "/api/preference-pairs/bulk", map[string]any{"method": "correction", "dry_run": true, "agreed_only": false}).
		Must(t, http.StatusOK).JSON(t, &preview)
	if preview.AgreedOnly || preview.Candidates != 1 || preview.LeftOut != 0 {
		t.Errorf("every-item preview: %+v; want 1 candidate", preview)
	}
}
