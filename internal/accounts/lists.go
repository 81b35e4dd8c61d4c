package accounts

import (
	"context"

	"github.com/google/uuid"

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
	return u, errs.NotFound(err)
}

// UserByEmail returns the organisation's user with the e-mail address (in
// any case), or errs.ErrNotFound, also when the address is another
// organisation's user's.
func (s *Service) UserByEmail(ctx context.Context, orgID uuid.UUID, email string) (db.User, error) {
	u, err := db.New(s.Pool).UserGetByEmail(ctx, email)
	if err != nil {
		return db.User{}, errs.NotFound(err)
	}
	if u.OrgID != orgID {
		return db.User{}, errs.ErrNotFound
	}
	return u, nil
}
