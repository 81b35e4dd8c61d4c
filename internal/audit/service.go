package audit

import (
	"context"
	"encoding/binary"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyset"
)

// ListName names the audit log in its keyset cursors.
const ListName = "audit"

// Service reads an organisation's audit log. Entries are written with
// Record, in the transaction of the change they describe.
type Service struct {
	Pool *pgxpool.Pool
}

// Filter narrows the log to one actor (a user's e-mail or a key's name) and
// one action; an empty field matches every entry.
type Filter struct {
	Actor  string
	Action string
}

// Page is one keyset page of the log.
type Page struct {
	Rows []db.AuditLog
	Next *keyset.Cursor // nil on the last page
}

// List returns a page of the organisation's log, newest first. The log is
// ordered by its row numbers, which follow the order entries were written
// in, so a cursor carries the last row's number in its id and no time.
func (s *Service) List(ctx context.Context, orgID uuid.UUID, f Filter, cursor *keyset.Cursor, limit int) (Page, error) {
	var before int64
	if cursor != nil {
		var ok bool
		if before, ok = rowNumber(cursor.ID); !ok {
			return Page{}, errs.InvalidField("cursor", "is not a cursor from this list")
		}
	}
	rows, err := db.New(s.Pool).AuditList(ctx, db.AuditListParams{OrgID: uuid.NullUUID{UUID: orgID, Valid: true},
		Actor: f.Actor, Action: f.Action, BeforeID: before, RowLimit: int32(limit + 1)})
	if err != nil {
		return Page{}, err
	}
	var p Page
	p.Rows, p.Next = keyset.Page(rows, limit, func(r db.AuditLog) keyset.Cursor { return keyset.Cursor{ID: rowID(r.ID)} })
	return p, nil
}

// Actions are the actions the organisation's log holds, for the filter.
func (s *Service) Actions(ctx context.Context, orgID uuid.UUID) ([]string, error) {
	return db.New(s.Pool).AuditActions(ctx, uuid.NullUUID{UUID: orgID, Valid: true})
}

// rowID writes a row number as a cursor id: the number in the last eight
// bytes, zeros before it.
func rowID(n int64) uuid.UUID {
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[8:], uint64(n))
	return id
}

// rowNumber reads a row number written by rowID; any other id is not one.
func rowNumber(id uuid.UUID) (int64, bool) {
	if binary.BigEndian.Uint64(id[:8]) != 0 {
		return 0, false
	}
	n := int64(binary.BigEndian.Uint64(id[8:]))
	return n, n > 0
}
