package views

import (
	"slices"
	"testing"
)

// A page belongs to the link whose path leads its own, segment by
// segment, the longest winning; the start page only to itself.
func TestActiveHref(t *testing.T) {
	for path, want := range map[string]string{
		"/":                            "/",
		"/feedback":                    "/feedback",
		"/feedback/conflicts":          "/feedback",
		"/codebooks/assistant/rules/7": "/codebooks",
		"/evaluations":                 "/evaluations",
		"/evaluations/agreement/1":     "/evaluations",
		"/evaluations/judges":          "/evaluations/judges",
		"/models/versions/1":           "/models",
		"/models/targets":              "/models/targets",
		"/experiments/assist-v3":       "/experiments",
		"/admin/audit":                 "/admin/audit",
		"/account":                     "",
		"/pairsandmore":                "",
		"/no-such-page":                "",
	} {
		if got := activeHref(path); got != want {
			t.Errorf("activeHref(%q) = %q, want %q", path, got, want)
		}
	}
}

// The navigation keeps the links the user may open, in their order, and
// drops a menu left empty; without a user or a table it shows nothing.
func TestNavFollowsAllowed(t *testing.T) {
	allowed := map[string]bool{"/": true, "/experiments": true, "/evaluations": true}
	p := Page{User: &User{Role: "viewer"}, Allowed: func(href string) bool { return allowed[href] }}
	var got []string
	for _, e := range p.nav() {
		got = append(got, e.Label)
		for _, l := range e.Menu {
			got = append(got, "  "+l.Label)
		}
	}
	if want := []string{"Overview", "Models", "  Evaluation", "  Experiments"}; !slices.Equal(got, want) {
		t.Errorf("nav %q, want %q", got, want)
	}
	if n := len((Page{Allowed: p.Allowed}).nav()); n != 0 {
		t.Errorf("signed out, the navigation has %d entries", n)
	}
	if n := len((Page{User: p.User}).nav()); n != 0 {
		t.Errorf("without the routes' roles, the navigation has %d entries", n)
	}
}
