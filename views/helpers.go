package views

import (
	"encoding/json"
	"slices"
	"strconv"
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
