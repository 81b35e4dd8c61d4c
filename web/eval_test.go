package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/curate/curate/web/webtest"
)

// The evaluation page: an admin marks a frozen version as a golden set
// (a refused form keeps what was typed), viewers read the list, and the
// set can be put down again.
func TestGoldenSetPages(t *testing.T) {
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
	// No split tags at all is an empty list, not a missing one.
	admin.PostForm("/evaluations/golden-sets", url.Values{"version_id": {version.ID.String()}, "name": {"Support gold"}, "split_tags": {""}}).
		Must(t, http.StatusSeeOther)
	if g, err := s.App.Eval.Get(ctx, seeded.OrgID, version.ID); err != nil || g.SplitTags == nil || len(g.SplitTags) != 0 {
		t.Errorf("a golden set marked with no split tags: %+v, %v; want an empty list", g.SplitTags, err)
	}
	viewer.PostForm("/evaluations/golden-sets/"+version.ID.String()+"/unmark", nil).Must(t, http.StatusForbidden)
	admin.PostForm("/evaluations/golden-sets/"+version.ID.String()+"/unmark", nil).Must(t, http.StatusSeeOther)
	if strings.Contains(viewer.Get("/evaluations").Body, `data-golden=`) {
		t.Error("still listed after it was put down")
	}
	assertAudit(t, s, "golden_set.mark", "golden_set.unmark")
}

// The promotion gate through the pages and the API: unset, a production
// deployment goes; set, a version never evaluated is refused with 409 and
// its page says why; an admin's written override lets it through and stays
// on the version.
func TestPromotionGatePages(t *testing.T) {
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
	s.User(seeded.OrgID, "ad@demo.test", "admin")
	admin := s.SignedIn("ad@demo.test")
	key := s.APIKey(seeded.OrgID, "ops", "admin")
	s.API(key, http.MethodPost, "/api/serving-targets", map[string]any{"name": "provider", "kind": "openai"}).Must(t, http.StatusCreated)
	var v modelDoc
	s.API(key, http.MethodPost, "/api/models", map[string]any{"name": "support", "model_id": "ft:gpt-4o-mini:acme::1"}).Must(t, http.StatusCreated).JSON(t, &v)
	page := "/models/versions/" + v.ID
	if body := admin.Get(page).Must(t, http.StatusOK).Body; !strings.Contains(body, `data-gate="unset"`) {
		t.Errorf("a version page without a gate: %s", body)
	}

	admin.PostForm("/evaluations/golden-sets", url.Values{"version_id": {version.ID.String()}, "name": {"Support gold"}, "split_tags": {"red_team"}}).
		Must(t, http.StatusSeeOther)
	res := admin.PostForm("/evaluations/gate", url.Values{"golden_set_version_id": {version.ID.String()}, "max_mean_drop": {"abc"},
		"regression_margin": {"0.1"}, "max_regressions": {"0"}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-max_mean_drop"`) || !strings.Contains(res.Body, `value="abc"`) {
		t.Errorf("a refused gate keeps the input: %s", res.Body)
	}
	admin.PostForm("/evaluations/gate", url.Values{"golden_set_version_id": {version.ID.String()}, "max_mean_drop": {"0.02"},
		"regression_margin": {"0.1"}, "max_regressions": {"0"}, "no_new_red_team_flags": {"1"}}).Must(t, http.StatusSeeOther)

	deploy := map[string]any{"alias": "production", "target": "provider", "reason": "ship it"}
	res = s.API(key, http.MethodPost, "/api/models/"+v.ID+"/deploy", deploy).Must(t, http.StatusConflict)
	if !strings.Contains(res.Body, "evaluation gate blocks production") {
		t.Errorf("deploying a version never evaluated: %s", res.Body)
	}
	// Other aliases are not gated.
	s.API(key, http.MethodPost, "/api/models/"+v.ID+"/deploy", map[string]any{"alias": "candidate", "target": "provider", "reason": "try"}).
		Must(t, http.StatusAccepted)
	body := admin.Get(page).Must(t, http.StatusOK).Body
	if !strings.Contains(body, `data-gate="fail"`) || !strings.Contains(body, "No finished evaluation") || !strings.Contains(body, `id="override-form"`) {
		t.Errorf("a failing version's page: %s", body)
	}
	res = admin.PostForm(page+"/override", url.Values{"reason": {""}}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-override_reason"`) {
		t.Errorf("an override without a reason: %s", res.Body)
	}
	admin.PostForm(page+"/override", url.Values{"reason": {"the old model is down; evaluation to follow"}}).Must(t, http.StatusSeeOther)
	body = admin.Get(page).Must(t, http.StatusOK).Body
	if !strings.Contains(body, "data-override") || !strings.Contains(body, "the old model is down") {
		t.Errorf("the override is not shown: %s", body)
	}
	// No workers run here: the candidate deployment is marked done by
	// hand, then production goes through on the override.
	if _, err := s.Pool.Exec(ctx, "UPDATE deployments SET status = 'succeeded'"); err != nil {
		t.Fatal(err)
	}
	s.API(key, http.MethodPost, "/api/models/"+v.ID+"/deploy", deploy).Must(t, http.StatusAccepted)
	assertAudit(t, s, "evaluation_gate.set", "evaluation_gate.override")
}
