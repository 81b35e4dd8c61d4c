// Package keyset is the one keyset cursor of every list: the position after
// the last row of a page, as (time, id), encoded with the list's name so a
// cursor from one list is refused by another.
package keyset

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
)

// Cursor is a position in a list ordered by (time, id) descending.
type Cursor struct {
	At time.Time
	ID uuid.UUID
}

// Encode writes the cursor for a URL. Times keep Postgres's microseconds.
func (c Cursor) Encode(list string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(list + "." + strconv.FormatInt(c.At.UnixMicro(), 10) + "." + c.ID.String()))
}

// Parse reads a cursor written by Encode for the same list; "" is the first
// page (nil). Anything else is an invalid "cursor" field.
func Parse(list, s string) (*Cursor, error) {
	if s == "" {
		return nil, nil
	}
	bad := errs.InvalidField("cursor", "is not a cursor from this list")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	parts := strings.Split(string(b), ".")
	if len(parts) != 3 || parts[0] != list {
		return nil, bad
	}
	micros, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return nil, bad
	}
	id, err := uuid.Parse(parts[2])
	if err != nil {
		return nil, bad
	}
	return &Cursor{At: time.UnixMicro(micros).UTC(), ID: id}, nil
}

// Page cuts rows fetched with limit+1 to limit and returns the cursor of the
// next page: nil when this is the last.
func Page[T any](rows []T, limit int, key func(T) Cursor) ([]T, *Cursor) {
	if len(rows) <= limit {
		return rows, nil
	}
	rows = rows[:limit]
	next := key(rows[limit-1])
	return rows, &next
}

// Bounds are a cursor as the list queries take it: nullable time and id.
func (c *Cursor) Bounds() (*time.Time, uuid.NullUUID) {
	if c == nil {
		return nil, uuid.NullUUID{}
	}
	at := c.At
	return &at, uuid.NullUUID{UUID: c.ID, Valid: true}
}

// EncodeSeq writes the position after a row of a list ordered by a row
// number alone (the audit log, whose bigint ids follow the order entries
// were written in).
func EncodeSeq(list string, n int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(list + ".#" + strconv.FormatInt(n, 10)))
}

// ParseSeq reads a cursor written by EncodeSeq for the same list; "" is the
// first page (0).
func ParseSeq(list, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	bad := errs.InvalidField("cursor", "is not a cursor from this list")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, bad
	}
	rest, ok := strings.CutPrefix(string(b), list+".#")
	if !ok {
		return 0, bad
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || n < 1 {
		return 0, bad
	}
	return n, nil
}

// InOrder returns rows in the order of ids, each converted: a page listed
// lean and then read whole by id comes back in its list order. An id with
// no row (deleted between the two reads) is left out.
func InOrder[R, O any](ids []uuid.UUID, rows []R, id func(R) uuid.UUID, conv func(R) O) []O {
	byID := make(map[uuid.UUID]R, len(rows))
	for _, r := range rows {
		byID[id(r)] = r
	}
	out := make([]O, 0, len(ids))
	for _, i := range ids {
		if r, ok := byID[i]; ok {
			out = append(out, conv(r))
		}
	}
	return out
}
