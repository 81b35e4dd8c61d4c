package handlers

import "strings"

// trimMax trims spaces and bounds a filter value's length.
func trimMax(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = s[:n]
	}
	return s
}
