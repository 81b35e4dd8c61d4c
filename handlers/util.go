package handlers

import (
	"strings"

	"github.com/google/uuid"
)

func nullUUID(id uuid.UUID) uuid.NullUUID { return uuid.NullUUID{UUID: id, Valid: true} }

// trimMax trims spaces and bounds a filter value's length.
func trimMax(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = s[:n]
	}
	return s
}
