package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/curate/curate/db"
	"github.com/curate/curate/web/webtest"
)

// An API key acts with the lesser of its own role and its creator's current
// role: a deactivated creator's keys are suspended, reactivation restores
// them, a demotion caps them.
func TestKeysFollowTheirOwner(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "root@acme.test", "admin")
	boss := s.User(org, "boss@acme.test", "admin")
	unowned := s.APIKey(org, "from the command line", "admin")

	bossC := s.SignedIn("boss@acme.test")
	bossC.Get("/admin/api-keys")
	created := bossC.PostForm("/admin/api-keys", url.Values{"name": {"boss's key"}, "role": {"admin"}}).Must(t, http.StatusCreated)
	key := regexpFind(t, `<pre id="new-secret">(cur_[a-z0-9_]+)</pre>`, created.Body)

	// An admin-only route: an admin gets past the role check to the
	// validation of the empty launch request.
	adminRoute := func(key string) int {
		return s.API(key, http.MethodPost, "/api/fine-tuning/jobs", map[string]any{}).Status
	}
	role := func(key string) string {
		var me map[string]string
		s.API(key, http.MethodGet, "/api/me", nil).Must(t, http.StatusOK).JSON(t, &me)
		return me["role"]
	}
	if st := adminRoute(key); st != http.StatusUnprocessableEntity {
		t.Fatalf("the key of an active admin on an admin route: %d; want 422", st)
	}

	root := s.SignedIn("root@acme.test")
	root.Get("/admin/users")
	root.PostForm("/admin/users/"+boss.String()+"/active", url.Values{"active": {"false"}}).Must(t, http.StatusSeeOther)
	// At once, though the key was checked (and cached) a moment ago.
	if st := adminRoute(key); st != http.StatusUnauthorized {
		t.Errorf("a deactivated admin's key on an admin route: %d; want 401", st)
	}
	res := s.API(key, http.MethodGet, "/api/me", nil).Must(t, http.StatusUnauthorized)
	if !strings.Contains(res.Body, "suspended") {
		t.Errorf("the refusal does not say the key is suspended: %s", res.Body)
	}
	if st := adminRoute(unowned); st != http.StatusUnprocessableEntity {
		t.Errorf("a key with no owner stopped working: %d", st)
	}
	page := root.Get("/admin/api-keys").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "suspended") {
		t.Error("the keys page does not show the key as suspended")
	}

	root.PostForm("/admin/users/"+boss.String()+"/active", url.Values{"active": {"true"}}).Must(t, http.StatusSeeOther)
	if st := adminRoute(key); st != http.StatusUnprocessableEntity {
		t.Errorf("the key after its owner's reactivation: %d; want 422", st)
	}
	if r := role(key); r != "admin" {
		t.Errorf("the key after reactivation acts as %q; want admin", r)
	}

	root.PostForm("/admin/users/"+boss.String()+"/role", url.Values{"role": {"curator"}}).Must(t, http.StatusSeeOther)
	if r := role(key); r != "curator" {
		t.Errorf("the key of an owner demoted to curator acts as %q", r)
	}
	if st := adminRoute(key); st != http.StatusForbidden {
		t.Errorf("the key of a demoted owner on an admin route: %d; want 403", st)
	}
	page = root.Get("/admin/api-keys").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "acts as curator") {
		t.Error("the keys page does not show the capped role")
	}

	keys, err := db.New(s.Pool).APIKeyList(context.Background(), org)
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys %d %v", len(keys), err)
	}
	for _, k := range keys {
		if k.RevokedAt != nil || k.Role != db.UserRoleAdmin {
			t.Errorf("key %s was changed in storage: role %s revoked %v", k.Name, k.Role, k.RevokedAt)
		}
	}
}
