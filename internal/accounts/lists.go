package accounts

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// ListUsers returns the organisation's users, oldest first, deactivated
// ones included.
func (s *Service) ListUsers(ctx context.Context, orgID uuid.UUID) ([]db.User, error) {
	return db.New(s.Pool).UserList(ctx, orgID)
}

// GetUser returns a user of the organisation, or errs.ErrNotFound.
func (s *Service) GetUser(ctx context.Context, orgID, userID uuid.UUID) (db.User, error) {
	u, err := db.New(s.Pool).UserGet(ctx, db.UserGetParams{OrgID: orgID, ID: userID})
	if errors.Is(err, pgx.ErrNoRows) {
		return u, errs.ErrNotFound
	}
	return u, err
}

// Summary counts an organisation's accounts for its overview.
type Summary struct {
	Users      int // deactivated ones included
	ActiveKeys int // neither revoked nor suspended
}

// Summarize counts the organisation's users and usable API keys.
func (s *Service) Summarize(ctx context.Context, orgID uuid.UUID) (Summary, error) {
	users, err := s.ListUsers(ctx, orgID)
	if err != nil {
		return Summary{}, err
	}
	keys, err := s.ListAPIKeys(ctx, orgID)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Users: len(users)}
	for _, k := range keys {
		if k.RevokedAt == nil && !k.Suspended {
			sum.ActiveKeys++
		}
	}
	return sum, nil
}
