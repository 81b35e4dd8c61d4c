package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/curate/curate/web/webtest"
)

// raceWrongPasswords sends n wrong passwords at once, the i-th for
// email(i), each from its own client, and counts the answers by status.
func raceWrongPasswords(t *testing.T, s *webtest.Server, n int, email func(int) string) map[int]int {
	t.Helper()
	clients := make([]*webtest.Client, n)
	for i := range clients {
		clients[i] = s.Client()
		clients[i].Get("/login").Must(t, http.StatusOK)
		// The checks that count are taken one at a time: on a loaded
		// machine the last answer can come after a client's usual 30 s.
		clients[i].HTTP.Timeout = 3 * time.Minute
	}
	statuses := make([]int, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			form := url.Values{"email": {email(i)}, "password": {"wrong-password-x"}, "_csrf": {c.CSRF()}}
			req, err := http.NewRequest(http.MethodPost, s.URL+"/login", strings.NewReader(form.Encode()))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			<-start
			res, err := c.HTTP.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			res.Body.Close()
			statuses[i] = res.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	count := map[int]int{}
	for i, st := range statuses {
		if errs[i] != nil {
			t.Fatalf("attempt %d: %v", i, errs[i])
		}
		count[st]++
	}
	return count
}

func countAudit(t *testing.T, s *webtest.Server, action string) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_log WHERE action = $1", action).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A hundred wrong passwords sent at once get exactly as many checks as the
// lockout allows, for one account and for one address alike; the rest are
// refused without a check.
func TestLockoutHoldsUnderParallelAttempts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		email   func(int) string
		checked int
	}{
		{"one account", func(int) string { return "eve@acme.test" }, 5},
		{"one address", func(i int) string { return fmt.Sprintf("nobody%d@acme.test", i) }, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := webtest.New(t, webtest.Options{})
			s.User(s.Org("acme"), "eve@acme.test", "viewer")
			got := raceWrongPasswords(t, s, 100, tc.email)
			if got[http.StatusUnauthorized] != tc.checked || got[http.StatusTooManyRequests] != 100-tc.checked {
				t.Errorf("answers %v; want %d × 401 and %d × 429", got, tc.checked, 100-tc.checked)
			}
			if n := countAudit(t, s, "auth.login_failed"); n != tc.checked {
				t.Errorf("%d passwords checked (auth.login_failed); want %d", n, tc.checked)
			}
			if n := countAudit(t, s, "auth.login_locked"); n != 100-tc.checked {
				t.Errorf("%d refusals audited (auth.login_locked); want %d", n, 100-tc.checked)
			}
		})
	}
}
