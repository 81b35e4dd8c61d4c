package audit

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/keyset"
)

// ListName names the audit log in its keyset cursors.
const ListName = "audit"

// Service reads an organisation's audit log. Entries are written with
// Record, in the transaction of the change they describe.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds the audit log reader on pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// Filter narrows the log to one actor (a user's e-mail or a key's name) and
// one action; an empty field matches every entry.
type Filter struct {
	Actor  string
	Action string
}

// Page is one keyset page of the log.
type Page struct {
	Rows []db.AuditLog
	Next string // the next page's cursor; "" on the last page
}

// List returns a page of the organisation's log, newest first, after the
// cursor of the previous page ("" for the first). The log is ordered by its
// row numbers, which follow the order entries were written in, so its
// cursor is a row number (keyset.EncodeSeq).
func (s *Service) List(ctx context.Context, orgID uuid.UUID, f Filter, cursor string, limit int) (Page, error) {
	before, err := keyset.ParseSeq(ListName, cursor)
	if err != nil {
		return Page{}, err
	}
	rows, err := db.New(s.Pool).AuditList(ctx, db.AuditListParams{OrgID: uuid.NullUUID{UUID: orgID, Valid: true},
		Actor: f.Actor, Action: f.Action, BeforeID: before, RowLimit: int32(limit + 1)})
	if err != nil {
		return Page{}, err
	}
	p := Page{Rows: rows}
	if len(rows) > limit {
		p.Rows = rows[:limit]
		p.Next = keyset.EncodeSeq(ListName, p.Rows[limit-1].ID)
	}
	return p, nil
}

// Actions are the actions the organisation's log holds, for the filter.
func (s *Service) Actions(ctx context.Context, orgID uuid.UUID) ([]string, error) {
	return db.New(s.Pool).AuditListActions(ctx, uuid.NullUUID{UUID: orgID, Valid: true})
}
