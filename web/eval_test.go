package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/curate/curate/internal/demo"
	"github.com/curate/curate/web/webtest"
)

// The evaluation page: an admin marks a frozen version as a golden set
// (a refused form keeps what was typed), viewers read the list, and the
// set can be put down again.
func TestGoldenSetPages(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	ctx := context.Background()
	seeded, err := demo.Ensure(ctx, s.App.Accounts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demo.SeedFeedback(ctx, s.Pool, seeded); err != nil {
		t.Fatal(err)
	}
	version, err := demo.SeedDataset(ctx, s.Pool, seeded.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	s.User(seeded.OrgID, "ad@demo.test", "admin")
	s.User(seeded.OrgID, "vi@demo.test", "viewer")
	admin, viewer := s.SignedIn("ad@demo.test"), s.SignedIn("vi@demo.test")

	res := viewer.Get("/evaluations").Must(t, http.StatusOK)
	if !strings.Contains(res.Body, "No golden sets yet") || strings.Contains(res.Body, `id="golden-form"`) {
		t.Errorf("a viewer's empty page: %s", res.Body)
	}
	res = admin.PostForm("/evaluations/golden-sets", url.Values{"version_id": {version.ID.String()}, "name": {""}, "split_tags": {"gold_set, Red Team"}}).
		Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-name"`) || !strings.Contains(res.Body, `id="err-split_tags"`) || !strings.Contains(res.Body, `value="gold_set, Red Team"`) {
		t.Errorf("a refused golden set keeps the input: %s", res.Body)
	}
	admin.PostForm("/evaluations/golden-sets", url.Values{"version_id": {version.ID.String()}, "name": {"Support gold"}, "split_tags": {"gold_set, red_team"}}).
		Must(t, http.StatusSeeOther)
	res = viewer.Get("/evaluations").Must(t, http.StatusOK)
	if !strings.Contains(res.Body, `data-golden="`+version.ID.String()+`"`) || !strings.Contains(res.Body, "gold_set, red_team") {
		t.Errorf("the golden set is not listed: %s", res.Body)
	}
	viewer.PostForm("/evaluations/golden-sets/"+version.ID.String()+"/unmark", nil).Must(t, http.StatusForbidden)
	admin.PostForm("/evaluations/golden-sets/"+version.ID.String()+"/unmark", nil).Must(t, http.StatusSeeOther)
	if strings.Contains(viewer.Get("/evaluations").Body, `data-golden=`) {
		t.Error("still listed after it was put down")
	}
	assertAudit(t, s, "golden_set.mark", "golden_set.unmark")
}
