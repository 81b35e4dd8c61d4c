package web_test

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/stats"
	"github.com/curate/curate/web/webtest"
)

// The judge over the demo's rated feedback: the judge stand-in agrees with
// the people on every answer but two, which it grades the other way; the
// report shows the kappa and correlation those give, computed here from
// the same pairs, and exactly the two disagreements reach the conflict
// tab, where a curator resolves one with a note.
func TestJudgeAgreement(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 1})
	ctx := context.Background()
	seeded, err := s.App.Demo.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Demo.SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	s.User(seeded.OrgID, "ad@demo.test", "admin")
	s.User(seeded.OrgID, "cu@demo.test", "curator")
	s.User(seeded.OrgID, "vi@demo.test", "viewer")
	admin, curator, viewer := s.SignedIn("ad@demo.test"), s.SignedIn("cu@demo.test"), s.SignedIn("vi@demo.test")

	// What people said of each answer, as the agreement reads it (the
	// queue's default filter leaves duplicates out).
	rows, err := s.Pool.Query(ctx, `SELECT response, rating, feedback_type::text FROM feedback
		WHERE org_id = $1 AND duplicate_of IS NULL AND (rating IS NOT NULL OR feedback_type IN ('thumbs_up', 'thumbs_down')) ORDER BY created_at DESC, id DESC`, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	type rated struct {
		answer string
		human  float64
		thumb  string
	}
	var items []rated
	for rows.Next() {
		var r rated
		var rating *int16
		var kind string
		if err := rows.Scan(&r.answer, &rating, &kind); err != nil {
			t.Fatal(err)
		}
		switch {
		case rating != nil:
			r.human = float64(*rating-1) / 4
			if *rating >= 4 {
				r.thumb = "up"
			} else if *rating <= 2 {
				r.thumb = "down"
			}
		case kind == "thumbs_up":
			r.human, r.thumb = 1, "up"
		default:
			r.thumb = "down"
		}
		items = append(items, r)
	}
	if err := rows.Err(); err != nil || len(items) < 5 {
		t.Fatalf("%d rated items, %v", len(items), err)
	}
	// The judge agrees, except on two answers rated at the extremes.
	judged := map[string]float64{}
	flipped := 0
	for _, it := range items {
		if _, seen := judged[it.answer]; seen {
			continue
		}
		judged[it.answer] = it.human
		if flipped < 2 && (it.human == 0 || it.human == 1) {
			judged[it.answer] = 1 - it.human
			flipped++
		}
	}
	var humans, scores []float64
	var ht, jt []string
	conflicts := 0
	for _, it := range items {
		j := judged[it.answer]
		humans, scores = append(humans, it.human), append(scores, j)
		if it.thumb != "" {
			th := "down"
			if j >= 0.5 {
				th = "up"
			}
			ht, jt = append(ht, it.thumb), append(jt, th)
		}
		if math.Abs(it.human-j) > 0.4 {
			conflicts++
		}
	}
	rho, err := stats.Spearman(humans, scores)
	if err != nil {
		t.Fatal(err)
	}
	kappa, err := stats.CohenKappa(ht, jt)
	if err != nil {
		t.Fatal(err)
	}
	judge := chattest.New(func(r chattest.Request) chattest.Reply {
		p := r.Last()
		for answer, score := range judged {
			if strings.Contains(p, "The assistant's answer:\n"+answer+"\n") {
				return chattest.Reply{Content: `{"score": ` + strconv.FormatFloat(score, 'f', -1, 64) + `, "safety_flag": false, "critique": "Graded against the policy."}`}
			}
		}
		return chattest.Reply{Content: "unknown answer"}
	})
	t.Cleanup(judge.Close)
	key := s.APIKey(seeded.OrgID, "ops", "admin")
	s.API(key, http.MethodPost, "/api/endpoints", map[string]any{"name": "deepseek", "base_url": judge.URL + "/v1", "model": "deepseek-chat"}).
		Must(t, http.StatusCreated)

	if body := viewer.Get("/evaluations/agreement").Must(t, http.StatusOK).Body; strings.Contains(body, `id="agreement-form"`) {
		t.Error("a viewer sees the start form")
	}
	viewer.PostForm("/evaluations/agreement", url.Values{"endpoint": {"deepseek"}}).Must(t, http.StatusForbidden)
	res := admin.PostForm("/evaluations/agreement", url.Values{"endpoint": {"nobody"}, "template": {"default"}, "threshold": {"high"},
		"items": {"500"}, "filter": {"rating_min=9"}}).Must(t, http.StatusUnprocessableEntity)
	for _, want := range []string{`id="err-threshold"`, `id="err-filter"`, `value="rating_min=9"`} {
		if !strings.Contains(res.Body, want) {
			t.Errorf("a refused start lacks %s", want)
		}
	}
	res = admin.PostForm("/evaluations/agreement", url.Values{"endpoint": {"deepseek"}, "template": {"default"}, "threshold": {"0.4"},
		"items": {"500"}, "filter": {""}}).Must(t, http.StatusSeeOther)
	report := res.Header.Get("Location")
	if !strings.HasPrefix(report, "/evaluations/agreement/") {
		t.Fatalf("started, sent to %q", report)
	}
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		body = admin.Get(report).Must(t, http.StatusOK).Body
		if strings.Contains(body, `data-status="succeeded"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never finished: %s", body)
		}
	}
	for _, want := range []string{
		`<dd id="spearman">` + strconv.FormatFloat(rho, 'f', 3, 64) + `</dd>`,
		`<dd id="kappa">` + strconv.FormatFloat(kappa.Kappa, 'f', 3, 64) + `</dd>`,
		`id="conflict-count">` + strconv.Itoa(conflicts) + ` conflict`,
		`id="confusion"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the report lacks %s", want)
		}
	}
	if conflicts < 2 {
		t.Fatalf("%d conflicts expected: the test needs the two flipped answers", conflicts)
	}

	tab := curator.Get("/feedback/conflicts").Must(t, http.StatusOK).Body
	ids := regexp.MustCompile(`data-conflict="([0-9a-f-]+)"`).FindAllStringSubmatch(tab, -1)
	if len(ids) != conflicts || !strings.Contains(tab, "Graded against the policy.") {
		t.Fatalf("%d conflicts in the tab, want %d", len(ids), conflicts)
	}
	first := ids[0][1]
	viewer.PostForm("/feedback/conflicts/"+first, url.Values{"resolution": {"judge_right"}}).Must(t, http.StatusForbidden)
	res = curator.PostForm("/feedback/conflicts/"+first, url.Values{"resolution": {"maybe"}, "note": {"not sure"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-resolution"`) || !strings.Contains(res.Body, "not sure</textarea>") {
		t.Errorf("a refused resolution keeps the note: %s", res.Body)
	}
	curator.PostForm("/feedback/conflicts/"+first, url.Values{"resolution": {"human_right"}, "note": {"The policy changed in May."}}).
		Must(t, http.StatusSeeOther)
	curator.PostForm("/feedback/conflicts/"+first, url.Values{"resolution": {"judge_right"}}).Must(t, http.StatusConflict)
	if tab := curator.Get("/feedback/conflicts").Must(t, http.StatusOK).Body; strings.Contains(tab, first) {
		t.Error("a resolved conflict is still open")
	}
	done := curator.Get("/feedback/conflicts?resolved=1").Must(t, http.StatusOK).Body
	if !strings.Contains(done, `data-resolution="human_right"`) || !strings.Contains(done, "The person is right") || !strings.Contains(done, "The policy changed in May.") {
		t.Errorf("the resolved tab: %s", done)
	}
	assertAudit(t, s, "judge.agreement", "judge.conflict_resolve")
}
