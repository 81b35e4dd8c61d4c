package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/curate/curate/web/webtest"
)

// together runs fn(i) for i in [0, n) at once, released together, and
// returns each call's status.
func together(n int, fn func(i int) int) []int {
	statuses := make([]int, n)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			statuses[i] = fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return statuses
}

func countStatus(statuses []int, status int) int {
	n := 0
	for _, s := range statuses {
		if s == status {
			n++
		}
	}
	return n
}

// Ten publishes of one codebook at once: one makes version 1 (201), the
// others find it holding the same rules and answer it (200). None fails,
// and one version is stored.
func TestConcurrentCodebookPublish(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	for _, r := range []string{"Refunds are possible within 14 days of purchase only.", "Point password resets to Settings, Security."} {
		s.API(admin, http.MethodPost, "/api/codebooks/support/rules", map[string]any{"section": "billing", "content": r, "status": "active"}).
			Must(t, http.StatusCreated)
	}
	versions := make([]publishedDoc, 10)
	statuses := together(10, func(i int) int {
		res := s.API(admin, http.MethodPost, "/api/codebooks/support/publish", nil)
		if res.Status == http.StatusCreated || res.Status == http.StatusOK {
			res.JSON(t, &versions[i])
		}
		return res.Status
	})
	if countStatus(statuses, http.StatusCreated) != 1 || countStatus(statuses, http.StatusOK) != 9 {
		t.Errorf("statuses %v; want one 201 and nine 200", statuses)
	}
	for _, v := range versions {
		if v.Version != 1 || v.ContentHash != versions[0].ContentHash {
			t.Errorf("a publish answered version %d (%s); want version 1 for all", v.Version, v.ContentHash)
		}
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM codebook_versions WHERE org_id = $1`, org).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d versions stored (%v); want 1", n, err)
	}
}

// Eight saves of one judge template at once, by eight admins' forms:
// saves of one text make one version, the others find it; saves of eight
// texts make eight versions, numbered 2 to 9 after the built-in first.
// None fails.
func TestConcurrentJudgeTemplateSaves(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admins := make([]*webtest.Client, 8)
	for i := range admins {
		email := fmt.Sprintf("ad%d@acme.test", i)
		s.User(org, email, "admin")
		admins[i] = s.SignedIn(email)
		admins[i].Get("/evaluations/judges").Must(t, http.StatusOK) // its CSRF token
	}
	versions := func(name string) []int {
		rows, err := s.Pool.Query(context.Background(), `SELECT version FROM judge_templates WHERE org_id = $1 AND name = $2 ORDER BY version`, org, name)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []int
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}

	statuses := together(8, func(i int) int {
		return admins[i].PostForm("/evaluations/judges/templates", url.Values{"name": {"strict"}, "body": {"Grade strictly: {{answer}}"}}).Status
	})
	if countStatus(statuses, http.StatusSeeOther) != 8 {
		t.Errorf("saving one text eight times at once: statuses %v; want 303 for each", statuses)
	}
	if got := versions("strict"); fmt.Sprint(got) != "[1]" {
		t.Errorf("versions %v after saving one text eight times; want [1]", got)
	}

	statuses = together(8, func(i int) int {
		return admins[i].PostForm("/evaluations/judges/templates", url.Values{"name": {"default"},
			"body": {fmt.Sprintf("Grade answer %d: {{answer}}", i)}}).Status
	})
	if countStatus(statuses, http.StatusSeeOther) != 8 {
		t.Errorf("saving eight texts at once: statuses %v; want 303 for each", statuses)
	}
	if got := versions("default"); fmt.Sprint(got) != "[2 3 4 5 6 7 8 9]" {
		t.Errorf("versions %v after eight texts; want 2 to 9", got)
	}
}
