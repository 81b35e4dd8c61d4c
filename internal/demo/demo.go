// Package demo seeds dev mode: a demo organisation, its first admin, and
// feedback on a fictional product's support assistant so the queue, the
// stats and the alerts have something to show.
package demo

import (
	"context"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
)

// OrgSlug and AdminEmail are the demo organisation and its admin.
const (
	OrgSlug    = "demo"
	AdminEmail = "admin@demo.local"
)

// Seeded says what Ensure did.
type Seeded struct {
	OrgID    uuid.UUID
	Created  bool   // false when the demo organisation already had users
	Email    string // the admin's e-mail
	Password string // set only when the admin was just created
}

// Ensure creates the demo organisation and an admin with a random password
// on first start; later starts change nothing.
func Ensure(ctx context.Context, acc *accounts.Service) (Seeded, error) {
	org, err := acc.EnsureOrg(ctx, OrgSlug, "Demo")
	if err != nil {
		return Seeded{}, err
	}
	users, err := db.New(acc.Pool).UserList(ctx, org.ID)
	if err != nil {
		return Seeded{}, err
	}
	if len(users) > 0 {
		return Seeded{OrgID: org.ID, Email: AdminEmail}, nil
	}
	pw := auth.GeneratePassword()
	_, err = acc.CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: AdminEmail, Name: "Demo Admin", Role: string(auth.Admin), Password: pw})
	if err != nil {
		return Seeded{}, err
	}
	return Seeded{OrgID: org.ID, Created: true, Email: AdminEmail, Password: pw}, nil
}
