// Package views holds Curate's templ components: the layout, the pages and
// the HTMX fragments. Components receive plain view models, never a database.
package views

import (
	"strings"
	"time"
)

// Page is what the layout needs on every page.
type Page struct {
	Title string
	// Path is the page's URL path: the navigation highlights the link that
	// holds it (see activeHref).
	Path    string
	User    *User // nil when signed out
	CSRF    string
	Flashes []Flash
	Alerts  []Alert // open alerts shown as banners on every Curate page
	// Allowed reports whether the user may open a local link (a path, with
	// or without a query), by the routes' roles; see CanOpen.
	Allowed func(href string) bool
}

// Alert is an open alert as a banner shows it.
type Alert struct {
	Severity string // "warn" or "bad"
	Title    string
	Message  string
	Link     string
}

// User is the signed-in user as the layout shows them.
type User struct {
	Email string
	Role  string
	Org   string
}

// Flash is a one-time message shown at the top of the next page.
type Flash struct {
	Kind string // "ok", "info", "warn" or "error"
	Text string
	// Link, when set, follows the text: where the result of the action is.
	Link, LinkText string
}

// When formats a time for tables, in UTC so every reader sees the same.
func When(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// WhenPtr formats an optional time.
func WhenPtr(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return When(*t)
}

// windowText is a time window from RFC 3339 bounds, in words ("from
// 2026-01-31 09:30 UTC to 2026-02-01 09:30 UTC"); an empty bound is open.
func windowText(since, until string) string {
	bound := func(s string) string {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return s
		}
		return When(t)
	}
	switch {
	case since != "" && until != "":
		return "from " + bound(since) + " to " + bound(until)
	case since != "":
		return "since " + bound(since)
	default:
		return "before " + bound(until)
	}
}

// namedMessage puts the field's name before its message: "Name is
// required", "Name: at most 200 characters".
func namedMessage(field, msg string) string {
	if strings.HasPrefix(msg, "is ") || strings.HasPrefix(msg, "must ") {
		return Label(field) + " " + msg
	}
	return Label(field) + ": " + msg
}
