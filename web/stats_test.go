package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/views"
	"github.com/curate/curate/web/webtest"
)

func statsItem(model, kind string, rating int) feedback.Item {
	it := feedback.Item{Query: "q " + uuid.NewString(), Response: "r", Model: model, FeedbackType: kind}
	if rating > 0 {
		it.Rating = &rating
	}
	return it
}

// statsIngest stores items for an organisation and returns their ids.
func statsIngest(t *testing.T, s *webtest.Server, org uuid.UUID, items ...feedback.Item) []uuid.UUID {
	t.Helper()
	res, err := (feedback.New(s.Pool)).IngestBatch(context.Background(), org, "api", items)
	if err != nil || res.Inserted != len(items) {
		t.Fatalf("ingest: %+v %v", res, err)
	}
	return res.IDs
}

// statsCell is the text of the element with the id.
func statsCell(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no #%s in the page", id)
	}
	return html.UnescapeString(m[1])
}

// statsRow is the cells of the table row carrying data-attr="key".
func statsRow(t *testing.T, body, attr, key string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr ` + attr + `="` + regexp.QuoteMeta(key) + `">(.*?)</tr>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no row %s=%q", attr, key)
	}
	var out []string
	for _, c := range regexp.MustCompile(`(?s)<td>(.*?)</td>`).FindAllStringSubmatch(m[1], -1) {
		out = append(out, strings.TrimSpace(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(html.UnescapeString(c[1]), " ")))
	}
	return out
}

// The stats page counts exactly the window's feedback of the caller's
// organisation. Hand count for the last 30 days:
// m1: 3 up, 1 down, ratings 5 and 4; m2: 1 down, ratings 2 and 3 (the
// detailed one with dimensions). Total 9, thumbs 3 up / 2 down = 60.0%,
// ratings 5+4+2+3 = 14 over 4 = 3.50.
func TestStatsPageCounts(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	ctx := context.Background()
	org, other := s.Org("acme"), s.Org("globex")
	s.User(org, "vera@acme.test", "viewer")
	detailed := statsItem("m2", "detailed", 3)
	detailed.Dimensions = &feedback.Dimensions{Accuracy: statsPtr(4), Helpfulness: statsPtr(3), Clarity: statsPtr(5), Safety: statsPtr(2)}
	ids := statsIngest(t, s, org,
		statsItem("m1", "thumbs_up", 0), statsItem("m1", "thumbs_up", 0), statsItem("m1", "thumbs_up", 0),
		statsItem("m1", "thumbs_down", 0), statsItem("m1", "rating", 5), statsItem("m1", "rating", 4),
		statsItem("m2", "thumbs_down", 0), statsItem("m2", "rating", 2), detailed,
		statsItem("m1", "rating", 1), // moved 40 days back below
	)
	if _, err := s.Pool.Exec(ctx, "UPDATE feedback SET created_at = now() - interval '40 days' WHERE id = $1", ids[9]); err != nil {
		t.Fatal(err)
	}
	statsIngest(t, s, other, statsItem("m1", "thumbs_down", 0), statsItem("m1", "rating", 1))
	// One review: approved by a curator.
	q := db.New(s.Pool)
	if _, err := s.Pool.Exec(ctx, "UPDATE feedback SET status = 'approved' WHERE id = $1", ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := q.FeedbackReviewInsert(ctx, db.FeedbackReviewInsertParams{OrgID: org, FeedbackID: ids[0], ActorLabel: "cora@acme.test",
		Action: "status", FromStatus: db.NullReviewStatus{ReviewStatus: "pending", Valid: true},
		ToStatus: db.NullReviewStatus{ReviewStatus: "approved", Valid: true}}); err != nil {
		t.Fatal(err)
	}

	c := s.SignedIn("vera@acme.test")
	body := c.Get("/stats").Must(t, http.StatusOK).Body
	for id, want := range map[string]string{"stat-total": "9", "stat-up": "3", "stat-down": "2", "stat-up-rate": "60.0%", "stat-avg": "3.50"} {
		if got := statsCell(t, body, id); got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	if got, want := statsRow(t, body, "data-model", "m1"), []string{"m1", "6", "3", "1", "75.0%", "2", "4.50"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("m1 row %v, want %v", got, want)
	}
	if got, want := statsRow(t, body, "data-model", "m2"), []string{"m2", "3", "0", "1", "0.0%", "2", "2.50"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("m2 row %v, want %v", got, want)
	}
	if got := statsRow(t, body, "data-dimension", "Safety"); got[1] != "1" || got[2] != "2.00" {
		t.Errorf("safety row %v, want 1 score averaging 2.00", got)
	}
	for rating, want := range map[string]string{"5": "1 25.0%", "3": "1 25.0%", "1": "0 0.0%"} {
		if got := statsRow(t, body, "data-bucket", rating); got[1]+" "+got[2] != want {
			t.Errorf("rating %s row %v, want %s", rating, got, want)
		}
	}
	if got := statsRow(t, body, "data-bucket", "approved"); got[1] != "1" {
		t.Errorf("approved row %v", got)
	}
	if got := statsRow(t, body, "data-bucket", "pending"); got[1] != "8" {
		t.Errorf("pending row %v", got)
	}
	if got := statsRow(t, body, "data-curator", "cora@acme.test"); got[1] != "1" || got[2] != "1" {
		t.Errorf("curator row %v, want 1 action, 1 approved", got)
	}
	// The charts' data: one point per day of the window, summing to the total.
	m := regexp.MustCompile(`(?s)<script id="stats-data" type="application/json">(.*?)</script>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no chart data block")
	}
	var chart views.StatsChart
	if err := json.Unmarshal([]byte(m[1]), &chart); err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, n := range chart.Volume {
		sum += n
	}
	if len(chart.X) != 30 || len(chart.Volume) != 30 || sum != 9 || len(chart.Models) != 2 || *chart.Models[0].UpRate[29] != 0.75 {
		t.Errorf("chart data: %d days, %d volume points summing to %d, %d models", len(chart.X), len(chart.Volume), sum, len(chart.Models))
	}
	if strings.Contains(body, " style=") || strings.Contains(body, " onclick=") {
		t.Error("inline style or handler in the page; the CSP forbids them")
	}

	if got := statsCell(t, c.Get("/stats?days=90").Must(t, http.StatusOK).Body, "stat-total"); got != "10" {
		t.Errorf("90 days: total %s, want 10", got)
	}
	m2 := c.Get("/stats?model=m2").Must(t, http.StatusOK).Body
	if statsCell(t, m2, "stat-total") != "3" || statsCell(t, m2, "stat-avg") != "2.50" {
		t.Errorf("model m2: total %s avg %s, want 3 and 2.50", statsCell(t, m2, "stat-total"), statsCell(t, m2, "stat-avg"))
	}
	for _, bad := range []string{"0", "366", "x"} {
		res := c.Get("/stats?days="+bad).Must(t, http.StatusUnprocessableEntity)
		if !strings.Contains(res.Body, "days") {
			t.Errorf("days=%s: the error does not name the field", bad)
		}
	}
}

func statsPtr(n int) *int { return &n }

// A safety report raises a banner on every page; a curator dismisses it,
// which hides the banner but keeps the alert open; viewers cannot, and
// another organisation's curator gets 404.
func TestAlertBannerAndDismiss(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	ctx := context.Background()
	org, other := s.Org("acme"), s.Org("globex")
	s.User(org, "vera@acme.test", "viewer")
	s.User(org, "cora@acme.test", "curator")
	s.User(other, "gus@globex.test", "curator")
	unsafe := statsItem("m1", "thumbs_down", 0)
	unsafe.Tags = []string{"safety"}
	statsIngest(t, s, org, unsafe)
	res, err := s.App.Services.Alerts.Evaluate(ctx, org, time.Now())
	if err != nil || len(res.Opened) != 1 {
		t.Fatalf("evaluate: %+v %v", res, err)
	}
	id := res.Opened[0].ID.String()

	viewer := s.SignedIn("vera@acme.test")
	home := viewer.Get("/").Must(t, http.StatusOK).Body
	if !strings.Contains(home, `class="banner banner-bad"`) || !strings.Contains(home, "1 safety report in the last 24 hours awaits review.") {
		t.Fatalf("no safety banner on the home page:\n%s", home)
	}
	if strings.Contains(s.SignedIn("gus@globex.test").Get("/").Body, "safety report") {
		t.Error("another organisation sees the banner")
	}
	list := viewer.Get("/alerts").Must(t, http.StatusOK).Body
	if !strings.Contains(list, `data-kind="safety"`) || strings.Contains(list, "/dismiss") {
		t.Error("viewer's list: want the alert without a dismiss button")
	}
	viewer.PostForm("/alerts/"+id+"/dismiss", nil).Must(t, http.StatusForbidden)
	s.SignedIn("gus@globex.test").PostForm("/alerts/"+id+"/dismiss", nil).Must(t, http.StatusNotFound)

	curator := s.SignedIn("cora@acme.test")
	if !strings.Contains(curator.Get("/alerts").Body, "/alerts/"+id+"/dismiss") {
		t.Error("curator's list has no dismiss button")
	}
	curator.PostForm("/alerts/"+id+"/dismiss", nil).Must(t, http.StatusSeeOther)
	if strings.Contains(viewer.Get("/").Body, "banner-bad") {
		t.Error("banner still shown after dismissing")
	}
	if !strings.Contains(viewer.Get("/alerts").Body, "dismissed by cora@acme.test") {
		t.Error("list does not say who dismissed")
	}
	if open, _ := db.New(s.Pool).AlertListOpen(ctx, org); len(open) != 1 {
		t.Errorf("%d open alerts after dismissing, want 1 (still open)", len(open))
	}
	assertAudit(t, s, "alert.dismiss")
}

// Admins set the rules and the webhook; the signing secret is shown once.
func TestAlertSettings(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	ctx := context.Background()
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	s.User(org, "cora@acme.test", "curator")
	s.SignedIn("cora@acme.test").Get("/alerts/settings").Must(t, http.StatusForbidden)

	admin := s.SignedIn("ada@acme.test")
	page := admin.Get("/alerts/settings").Must(t, http.StatusOK).Body
	if !strings.Contains(page, `name="rating_threshold" min="1.01" max="5" step="0.01" value="3.5"`) {
		t.Error("the form does not show the default threshold 3.5")
	}
	form := url.Values{"enabled": {"true"}, "rating_threshold": {"3.8"}, "min_ratings": {"20"}, "window_hours": {"12"},
		"baseline_days": {"14"}, "spike_factor": {"2.5"}, "spike_min_count": {"8"}, "webhook_url": {"ftp://hooks.example.com"}}
	bad := admin.PostForm("/alerts/settings", form).Must(t, http.StatusUnprocessableEntity).Body
	if !strings.Contains(bad, `id="err-webhook_url"`) || !strings.Contains(bad, `value="3.8"`) {
		t.Error("the refused form does not name webhook_url or lost what was entered")
	}
	form.Set("webhook_url", "https://hooks.example.com/curate")
	admin.PostForm("/alerts/settings", form).Must(t, http.StatusSeeOther)
	got, hasSecret, err := s.App.Services.Alerts.Settings(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if got.RatingThreshold != 3.8 || got.MinRatings != 20 || got.Window != 12*time.Hour || got.BaselineDays != 14 ||
		got.SpikeFactor != 2.5 || got.SpikeMinCount != 8 || got.WebhookURL != "https://hooks.example.com/curate" || hasSecret {
		t.Errorf("stored %+v", got)
	}

	created := admin.PostForm("/alerts/settings/secret", nil).Must(t, http.StatusCreated)
	secret := regexpFind(t, `(whsec_[A-Za-z0-9+/=]+)`, created.Body)
	// Stored sealed (deliveries are signed with it: see the alerts tests).
	if _, has, err := s.App.Services.Alerts.Settings(ctx, org); err != nil || !has {
		t.Errorf("after making a secret the settings have none (%v)", err)
	}
	if found := pgtest.TablesContaining(t, s.Pool, strings.TrimPrefix(secret, "whsec_")); len(found) > 0 {
		t.Errorf("the secret is stored in the clear in %v", found)
	}
	if created.Header.Get("Cache-Control") != "no-store" {
		t.Error("the page with the secret may be cached")
	}
	if strings.Contains(admin.Get("/alerts/settings").Body, "whsec_") {
		t.Error("the secret is shown again")
	}
	assertAudit(t, s, "alerts.settings", "alerts.webhook_secret")
}

// In a real browser the stats page draws its three charts with the
// vendored chart library under the strict CSP.
func TestBrowserStatsCharts(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	statsIngest(t, s, org, statsItem("m1", "thumbs_up", 0), statsItem("m1", "rating", 4), statsItem("m2", "thumbs_down", 0))
	ctx := webtest.Browser(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/login?next=/stats"),
		chromedp.WaitVisible(`input[name=email]`),
		chromedp.SendKeys(`input[name=email]`, "ada@acme.test"),
		chromedp.SendKeys(`input[name=password]`, webtest.Password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`#stats-totals`),
		chromedp.WaitVisible(`.chart[data-chart="avg_rating"] canvas`),
	)
	if err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, ctx, "stats")
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".chart canvas").length`))
	if err != nil || n != 3 {
		t.Fatalf("%d chart canvases (%v), want 3", n, err)
	}
}

// The alerts list shows 50 alerts a page, newest first, and links to the
// older ones with a keyset cursor; another list's cursor is refused.
func TestAlertListPages(t *testing.T) {
	s := webtest.New(t, webtest.Options{})
	ctx := context.Background()
	org := s.Org("acme")
	s.User(org, "vera@acme.test", "viewer")
	q := db.New(s.Pool)
	base := time.Now().Add(-time.Hour)
	for i := range 52 {
		if _, err := q.AlertInsert(ctx, db.AlertInsertParams{OrgID: org, Kind: "low_rating", Severity: "warn", DedupKey: fmt.Sprintf("low_rating:m%02d", i),
			Title: fmt.Sprintf("Low ratings for m%02d", i), Message: "below 3.50.", Details: []byte("{}"), Now: base.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	// The list's titles, not the banners' above it.
	titles := func(body string) []string {
		var out []string
		_, table, _ := strings.Cut(body, "<table")
		for _, m := range regexp.MustCompile(`Low ratings for (m\d\d)`).FindAllStringSubmatch(table, -1) {
			out = append(out, m[1])
		}
		return out
	}
	viewer := s.SignedIn("vera@acme.test")
	first := viewer.Get("/alerts").Must(t, http.StatusOK).Body
	if got := titles(first); len(got) != 50 || got[0] != "m51" || got[49] != "m02" {
		t.Fatalf("first page: %d alerts, %v", len(got), got)
	}
	next := html.UnescapeString(regexpFind(t, `<a href="(/alerts\?cursor=[^"]+)">Older alerts</a>`, first))
	second := viewer.Get(next).Must(t, http.StatusOK).Body
	if got := titles(second); len(got) != 2 || got[0] != "m01" || got[1] != "m00" || strings.Contains(second, "Older alerts") {
		t.Errorf("second page: %v", got)
	}
	viewer.Get("/alerts?cursor="+keyset.Cursor{At: time.Now(), ID: uuid.New()}.Encode(audit.ListName)).Must(t, http.StatusUnprocessableEntity)
}
