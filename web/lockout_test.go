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
	return raceSignIns(t, s, n, email, "wrong-password-x")
}

// raceSignIns sends n sign-ins with password at once, the i-th for
// email(i), each from its own client, and counts the answers by status.
func raceSignIns(t *testing.T, s *webtest.Server, n int, email func(int) string, password string) map[int]int {
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
			form := url.Values{"email": {email(i)}, "password": {password}, "_csrf": {c.CSRF()}}
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

// Only failed password checks count towards the lockout: thirty correct
// sign-ins at once, to one account and from one address, all get in (none
// waits behind the others' checks as if they had failed), and the lockout
// still holds afterwards for wrong passwords.
func TestLockoutCountsOnlyFailures(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	s.User(s.Org("acme"), "ada@acme.test", "viewer")
	got := raceSignIns(t, s, 30, func(int) string { return "ada@acme.test" }, webtest.Password)
	if got[http.StatusSeeOther] != 30 {
		t.Errorf("30 correct sign-ins at once: answers %v; want 30 × 303", got)
	}
	if n := countAudit(t, s, "auth.login"); n != 30 {
		t.Errorf("%d sign-ins audited (auth.login); want 30", n)
	}
	if n := countAudit(t, s, "auth.login_failed") + countAudit(t, s, "auth.login_locked"); n != 0 {
		t.Errorf("%d failures or refusals audited for correct passwords; want 0", n)
	}
	got = raceWrongPasswords(t, s, 20, func(int) string { return "ada@acme.test" })
	if got[http.StatusUnauthorized] != 5 || got[http.StatusTooManyRequests] != 15 {
		t.Errorf("20 wrong passwords after them: %v; want 5 × 401 and 15 × 429", got)
	}
}
