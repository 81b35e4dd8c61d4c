package views

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// csrfHeaders is the hx-headers value that sends the CSRF token with every
// HTMX request.
func csrfHeaders(token string) string {
	b, _ := json.Marshal(map[string]string{"X-CSRF-Token": token})
	return string(b)
}

func itoa(n int) string { return strconv.Itoa(n) }

// contains reports whether list holds s.
func contains(list []string, s string) bool { return slices.Contains(list, s) }

// forMethod says whether what applies to the methods named is shown for
// the chosen one; the form's default method is supervised.
func forMethod(chosen string, methods ...string) bool {
	if chosen == "" {
		chosen = "supervised"
	}
	return slices.Contains(methods, chosen)
}

// worstSeverity is the severity a summary of alerts wears: bad when any
// one is.
func worstSeverity(alerts []Alert) string {
	for _, a := range alerts {
		if a.Severity == "bad" {
			return "bad"
		}
	}
	return "warn"
}

// alertTitles names the alerts in one line, newest first, as listed.
func alertTitles(alerts []Alert) string {
	titles := make([]string, len(alerts))
	for i, a := range alerts {
		titles[i] = a.Title
	}
	return strings.Join(titles, " · ")
}
