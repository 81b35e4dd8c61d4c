// Package accounts creates and changes organisations, users and API keys,
// and signs callers in. Every change is written to the audit log in the same
// transaction.
package accounts

import (
	"context"
	"errors"
	"net/mail"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/singleflight"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
)

// Service holds what account operations need.
type Service struct {
	Pool *pgxpool.Pool
	// Lockout: more than MaxFailuresPerEmail failed sign-ins for one account,
	// or MaxFailuresPerIP from one address, within Window lock sign-in out.
	MaxFailuresPerEmail int
	MaxFailuresPerIP    int
	Window              time.Duration
	// SessionTTL is how long a browser stays signed in.
	SessionTTL time.Duration
	Now        func() time.Time
	touched    sync.Map // API key id → when its last use was recorded
	keys       sync.Map // API key prefix → cachedKey
	keyLookups singleflight.Group
}

// DefaultSessionTTL is how long a browser stays signed in unless the
// configuration says otherwise (CURATE_SESSION_TTL).
const DefaultSessionTTL = 12 * time.Hour

// New returns a Service with the default lockout policy, whose sign-ins
// last sessionTTL.
func New(pool *pgxpool.Pool, sessionTTL time.Duration) *Service {
	return &Service{Pool: pool, MaxFailuresPerEmail: 5, MaxFailuresPerIP: 30, Window: 15 * time.Minute,
		SessionTTL: sessionTTL, Now: time.Now}
}

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// EnsureOrg returns the organisation with slug, creating it if needed.
func (s *Service) EnsureOrg(ctx context.Context, slug, name string) (db.Organization, error) {
	if !slugRE.MatchString(slug) {
		return db.Organization{}, errs.InvalidField("org", "an organisation slug is 1-63 lowercase letters, digits and dashes")
	}
	q := db.New(s.Pool)
	org, err := q.OrgGetBySlug(ctx, slug)
	if err == nil {
		return org, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return db.Organization{}, err
	}
	if name == "" {
		name = slug
	}
	org, err = q.OrgInsert(ctx, db.OrgInsertParams{Slug: slug, Name: name})
	if errs.IsUnique(err, "organizations_slug_key") { // created meanwhile
		return q.OrgGetBySlug(ctx, slug)
	}
	return org, err
}

// OrgBySlug finds an organisation.
func (s *Service) OrgBySlug(ctx context.Context, slug string) (db.Organization, error) {
	org, err := db.New(s.Pool).OrgGetBySlug(ctx, slug)
	if errors.Is(err, pgx.ErrNoRows) {
		return org, errs.InvalidField("org", "no organisation %q", slug)
	}
	return org, err
}

// NewUser is the input for CreateUser.
type NewUser struct {
	Email    string
	Name     string
	Role     string
	Password string
}

// CreateUser validates and stores a user.
func (s *Service) CreateUser(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewUser) (db.User, error) {
	in.Email = strings.TrimSpace(in.Email)
	in.Name = strings.TrimSpace(in.Name)
	v := &errs.Invalid{}
	if addr, err := mail.ParseAddress(in.Email); err != nil || addr.Address != in.Email || len(in.Email) > 254 {
		v.Add("email", "enter an e-mail address like name@example.com")
	}
	if len(in.Name) > 200 {
		v.Add("name", "at most 200 characters")
	}
	role, err := auth.ParseRole(in.Role)
	if err != nil {
		v.Add("role", "%s", err.Error())
	}
	if err := auth.CheckPasswordStrength(in.Password); err != nil {
		v.Add("password", "%s", err.Error())
	}
	if v.Has() {
		return db.User{}, v
	}
	hash, err := auth.HashPassword(in.Password)
	if err != nil {
		return db.User{}, err
	}
	var u db.User
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		u, err = q.UserInsert(ctx, db.UserInsertParams{OrgID: orgID, Email: in.Email, Name: in.Name, PasswordHash: hash, Role: db.UserRole(role)})
		if errs.IsUnique(err, "users_email_key") {
			return errs.InvalidField("email", "a user with this e-mail address already exists")
		}
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "user.create", TargetType: "user",
			TargetID: u.ID.String(), Details: map[string]any{"email": u.Email, "role": u.Role}})
	})
	return u, err
}

// ChangeRole sets a user's role, ending their sessions; the keys they
// created act with at most the new role (see KeyRole). The last active
// admin cannot lose the role.
func (s *Service) ChangeRole(ctx context.Context, actor audit.Actor, orgID, userID uuid.UUID, roleText string) (db.User, error) {
	role, err := auth.ParseRole(roleText)
	if err != nil {
		return db.User{}, errs.InvalidField("role", "%s", err.Error())
	}
	var u db.User
	err = db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		old, err := lockUser(ctx, q, orgID, userID)
		if err != nil {
			return err
		}
		if old.Role == db.UserRoleAdmin && role != auth.Admin && old.Active {
			if err := ensureAnotherAdmin(ctx, q, orgID); err != nil {
				return err
			}
		}
		if u, err = q.UserUpdateRole(ctx, db.UserUpdateRoleParams{OrgID: orgID, ID: userID, Role: db.UserRole(role)}); err != nil {
			return err
		}
		var ended int64
		if old.Role != u.Role {
			// Pages and forms open in the user's browsers were made for the old role.
			if ended, err = q.SessionDeleteByUser(ctx, userID); err != nil {
				return err
			}
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "user.role_change", TargetType: "user",
			TargetID: u.ID.String(), Details: map[string]any{"email": u.Email, "from": old.Role, "to": u.Role, "sessions_ended": ended}})
	})
	if err == nil {
		s.forgetKeysOf(userID)
	}
	return u, err
}

// SetActive activates or deactivates a user. Deactivating ends the user's
// sessions for good (reactivation does not bring them back) and suspends
// the API keys they created until they are reactivated (see KeyRole).
func (s *Service) SetActive(ctx context.Context, actor audit.Actor, orgID, userID uuid.UUID, active bool) (db.User, error) {
	var u db.User
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		old, err := lockUser(ctx, q, orgID, userID)
		if err != nil {
			return err
		}
		if !active && old.Active && old.Role == db.UserRoleAdmin {
			if err := ensureAnotherAdmin(ctx, q, orgID); err != nil {
				return err
			}
		}
		if u, err = q.UserUpdateActive(ctx, db.UserUpdateActiveParams{OrgID: orgID, ID: userID, Active: active}); err != nil {
			return err
		}
		action, details := "user.activate", map[string]any{"email": u.Email}
		if !active {
			action = "user.deactivate"
			ended, err := q.SessionDeleteByUser(ctx, userID)
			if err != nil {
				return err
			}
			details["sessions_ended"] = ended
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: action, TargetType: "user",
			TargetID: u.ID.String(), Details: details})
	})
	if err == nil {
		s.forgetKeysOf(userID)
	}
	return u, err
}

// lockUser reads a user of the organisation, holding the organisation's
// admin set still until the transaction ends.
func lockUser(ctx context.Context, q *db.Queries, orgID, userID uuid.UUID) (db.User, error) {
	if err := q.UserGetAdminsForUpdate(ctx, orgID); err != nil {
		return db.User{}, err
	}
	u, err := q.UserGet(ctx, db.UserGetParams{OrgID: orgID, ID: userID})
	return u, errs.NotFound(err)
}

func ensureAnotherAdmin(ctx context.Context, q *db.Queries, orgID uuid.UUID) error {
	n, err := q.UserCountAdmins(ctx, orgID)
	if err != nil {
		return err
	}
	if n <= 1 {
		return &errs.Conflict{Message: "this is the organisation's last active admin: make another user admin first"}
	}
	return nil
}

// NewKey is the input for CreateAPIKey.
type NewKey struct {
	Name string
	Role string
}

// CreateAPIKey stores a new key and returns its secret text, shown once.
func (s *Service) CreateAPIKey(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewKey) (db.APIKey, string, error) {
	in.Name = strings.TrimSpace(in.Name)
	v := &errs.Invalid{}
	if in.Name == "" || len(in.Name) > 100 {
		v.Add("name", "give the key a name of 1 to 100 characters")
	}
	role, err := auth.ParseRole(in.Role)
	if err != nil {
		v.Add("role", "%s", err.Error())
	}
	if v.Has() {
		return db.APIKey{}, "", v
	}
	full, prefix, hash := auth.NewAPIKey()
	createdBy := uuid.NullUUID{UUID: actor.ID, Valid: actor.Kind == "user"}
	var k db.APIKey
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		k, err = q.APIKeyInsert(ctx, db.APIKeyInsertParams{OrgID: orgID, Name: in.Name, Prefix: prefix, SecretHash: hash, Role: db.UserRole(role), CreatedBy: createdBy})
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "api_key.create", TargetType: "api_key",
			TargetID: k.ID.String(), Details: map[string]any{"name": k.Name, "role": k.Role, "prefix": k.Prefix}})
	})
	return k, full, err
}

// RevokeAPIKey revokes a key; revoking twice is a conflict.
func (s *Service) RevokeAPIKey(ctx context.Context, actor audit.Actor, orgID, keyID uuid.UUID) (db.APIKey, error) {
	var k db.APIKey
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		var err error
		k, err = q.APIKeyUpdateRevoked(ctx, db.APIKeyUpdateRevokedParams{OrgID: orgID, ID: keyID})
		if err != nil {
			return errs.NotFound(err)
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "api_key.revoke", TargetType: "api_key",
			TargetID: k.ID.String(), Details: map[string]any{"name": k.Name, "prefix": k.Prefix}})
	})
	if err == nil {
		// After the commit: a request between forgetting and committing
		// would cache the key again, still unrevoked.
		s.forgetKey(k.Prefix)
	}
	return k, err
}
