// Package demo seeds dev mode: a demo organisation, its first admin, and
// feedback on a fictional product's support assistant so the queue, the
// stats and the alerts have something to show.
package demo

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/feedback"
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

// Seeder seeds dev mode through the services every process uses: what it
// stores is stored as a person or the API would store it. Only dating the
// demo feedback back and reviewing it in the past are its own queries.
type Seeder struct {
	pool     *pgxpool.Pool
	accounts *accounts.Service
	feedback *feedback.Service
	alerts   *alerts.Service
	datasets *datasets.Service
}

// New builds the seeder on the process's services.
func New(pool *pgxpool.Pool, acc *accounts.Service, fb *feedback.Service, al *alerts.Service, ds *datasets.Service) *Seeder {
	return &Seeder{pool: pool, accounts: acc, feedback: fb, alerts: al, datasets: ds}
}

// Ensure creates the demo organisation and an admin with a random password
// on first start; later starts change nothing.
func (s *Seeder) Ensure(ctx context.Context) (Seeded, error) {
	org, err := s.accounts.EnsureOrg(ctx, OrgSlug, "Demo")
	if err != nil {
		return Seeded{}, err
	}
	users, err := s.accounts.ListUsers(ctx, org.ID)
	if err != nil {
		return Seeded{}, err
	}
	if len(users) > 0 {
		return Seeded{OrgID: org.ID, Email: AdminEmail}, nil
	}
	pw := auth.GeneratePassword()
	_, err = s.accounts.CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: AdminEmail, Name: "Demo Admin", Role: string(auth.Admin), Password: pw})
	if err != nil {
		return Seeded{}, err
	}
	return Seeded{OrgID: org.ID, Created: true, Email: AdminEmail, Password: pw}, nil
}
