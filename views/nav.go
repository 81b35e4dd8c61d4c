package views

import "strings"

// NavLink is one link of the top navigation.
type NavLink struct {
	Label string
	Href  string
}

// NavEntry is one place in the top bar: a link, or a menu of links (Menu
// set) where the bar has no room for them side by side.
type NavEntry struct {
	NavLink
	Menu []NavLink
	ID   string // the menu's id, for tests and scripts
}

// Navigation is the top bar in the order of the loop: feedback comes in
// and is reviewed, becomes pairs, rules and datasets, trains a model, and
// the model is registered, evaluated, served and tested. Which entry is
// highlighted follows from the page's path, and which are shown from the
// routes a role may open, so neither is kept twice.
var Navigation = []NavEntry{
	{NavLink: NavLink{"Overview", "/"}},
	{NavLink: NavLink{"Imports", "/imports"}},
	{NavLink: NavLink{"Feedback", "/feedback"}},
	{NavLink: NavLink{"Pairs", "/pairs"}},
	{NavLink: NavLink{"Codebooks", "/codebooks"}},
	{NavLink: NavLink{"Datasets", "/datasets"}},
	{NavLink: NavLink{"Fine-tuning", "/fine-tuning"}},
	{NavLink: NavLink{Label: "Models"}, ID: "models-menu", Menu: []NavLink{
		{"Registry", "/models"},
		{"Evaluation", "/evaluations"},
		{"Experiments", "/experiments"},
		{"Shadows", "/shadows"},
		{"Loops", "/loops"},
		{"Judges", "/evaluations/judges"},
		{"Serving targets", "/models/targets"},
		{"Monitors", "/monitors"},
	}},
	{NavLink: NavLink{"Stats", "/stats"}},
	{NavLink: NavLink{"Alerts", "/alerts"}},
	{NavLink: NavLink{Label: "Admin"}, ID: "admin-menu", Menu: []NavLink{
		{"Users", "/admin/users"},
		{"API keys", "/admin/api-keys"},
		{"Audit log", "/admin/audit"},
	}},
}

// CanOpen reports whether the signed-in user's role may open href, by the
// same table of routes that refuses them: a link they may not follow is
// not shown. Without a user or a table nothing may be opened.
func (p Page) CanOpen(href string) bool {
	return p.User != nil && p.Allowed != nil && p.Allowed(href)
}

// nav is the navigation as p's user sees it: the links they may open,
// menus left with none dropped.
func (p Page) nav() []NavEntry {
	var out []NavEntry
	for _, e := range Navigation {
		if e.Menu == nil {
			if p.CanOpen(e.Href) {
				out = append(out, e)
			}
			continue
		}
		var links []NavLink
		for _, l := range e.Menu {
			if p.CanOpen(l.Href) {
				links = append(links, l)
			}
		}
		if len(links) > 0 {
			e.Menu = links
			out = append(out, e)
		}
	}
	return out
}

// activeHref is the navigation link the page belongs to: the one whose
// path is the longest leading part of the page's, segment by segment
// ("/codebooks/assistant/rules/7" belongs to "/codebooks",
// "/evaluations/judges" to Judges rather than Evaluation); "/" only for
// the start page itself. Empty when no link holds the page.
func activeHref(path string) string {
	best := ""
	consider := func(href string) {
		if href == "/" {
			if path == "/" {
				best = href
			}
			return
		}
		if (path == href || strings.HasPrefix(path, href+"/")) && len(href) > len(best) {
			best = href
		}
	}
	for _, e := range Navigation {
		if e.Href != "" {
			consider(e.Href)
		}
		for _, l := range e.Menu {
			consider(l.Href)
		}
	}
	if best == "" {
		for under, href := range belongsTo {
			if path == under || strings.HasPrefix(path, under+"/") {
				return href
			}
		}
	}
	return best
}

// belongsTo places pages that have no link of their own under the link of
// the work they are part of: overlapping review is reviewing feedback.
var belongsTo = map[string]string{
	"/review":  "/feedback",
	"/rubrics": "/feedback",
}

// menuActive reports whether one of a menu's links is the active one.
func menuActive(links []NavLink, active string) bool {
	for _, l := range links {
		if l.Href == active {
			return true
		}
	}
	return false
}
