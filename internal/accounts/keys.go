package accounts

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
)

// ErrBadKey is the answer for a malformed, unknown or revoked API key.
var ErrBadKey = errors.New("invalid or revoked API key")

// ErrKeySuspended is the answer for a key whose creator is deactivated.
var ErrKeySuspended = errors.New("API key suspended: the user who created it is deactivated")

// KeyRole is the rule that keys follow their owner: a key acts with the
// lesser of its own role and its creator's current role, and a key whose
// creator is deactivated is suspended (until they are reactivated). A key
// made from the command line has no creator and acts with its own role.
func KeyRole(own db.UserRole, owner db.NullUserRole, ownerDeactivated bool) (role auth.Role, suspended bool) {
	if ownerDeactivated {
		return "", true
	}
	role = auth.Role(own)
	if owner.Valid && !auth.Role(owner.UserRole).AtLeast(role) {
		role = auth.Role(owner.UserRole)
	}
	return role, false
}

// Key is an API key as the requests made with it act.
type Key struct {
	ID      uuid.UUID
	OrgID   uuid.UUID
	OrgSlug string
	OrgName string
	Name    string
	Role    auth.Role // capped by its creator's, see KeyRole
}

// keyCacheTTL is how long a checked API key is trusted without asking the
// database again. A key revoked, or whose creator is deactivated or has
// their role changed, on this server follows at once; on other servers
// within this time.
const keyCacheTTL = 5 * time.Second

type cachedKey struct {
	row     db.APIKeyGetCallerRow
	expires time.Time
}

// KeyCaller checks a bearer API key and returns it with its organisation
// and the role it acts with, in one query, trusted for keyCacheTTL
// afterwards. When the trust runs out under load, every request then in
// flight with the key finds it out at once: they wait for one query, not
// one each, which queued behind each other for the pool's few
// connections. Its last use is recorded at most once a minute per key and
// process, so a busy key does not write on every request.
func (s *Service) KeyCaller(ctx context.Context, bearer string) (Key, error) {
	prefix, hash, err := auth.ParseAPIKey(bearer)
	if err != nil {
		return Key{}, ErrBadKey
	}
	now := s.Now()
	if c, ok := s.keys.Load(prefix); ok {
		if c := c.(cachedKey); now.Before(c.expires) && auth.HashMatches(c.row.SecretHash, hash) {
			return keyOf(c.row)
		}
	}
	// The query outlives a caller that gives up, for the others waiting
	// on it. Its answer is cached before they are woken, so one arriving
	// later finds it; each caller checks its own secret against it.
	found, err, _ := s.keyLookups.Do(prefix, func() (any, error) {
		k, err := db.New(s.Pool).APIKeyGetCaller(context.WithoutCancel(ctx), prefix)
		if err == nil && k.RevokedAt == nil {
			s.keys.Store(prefix, cachedKey{row: k, expires: now.Add(keyCacheTTL)})
		}
		return k, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrBadKey
	}
	if err != nil {
		return Key{}, err
	}
	k := found.(db.APIKeyGetCallerRow)
	if !auth.HashMatches(k.SecretHash, hash) || k.RevokedAt != nil {
		return Key{}, ErrBadKey
	}
	key, err := keyOf(k)
	if err != nil {
		return Key{}, err
	}
	if s.claimTouch(k.ID, now) {
		if err := db.New(s.Pool).APIKeyUpdateLastUsed(ctx, k.ID); err != nil {
			return Key{}, err
		}
	}
	return key, nil
}

// claimTouch says whether this request records key's last use: the first
// request a minute after the last recorded one, and only it, however many
// find the minute over at once.
func (s *Service) claimTouch(key uuid.UUID, now time.Time) bool {
	last, seen := s.touched.LoadOrStore(key, now)
	if !seen {
		return true
	}
	return now.Sub(last.(time.Time)) > time.Minute && s.touched.CompareAndSwap(key, last, now)
}

func keyOf(k db.APIKeyGetCallerRow) (Key, error) {
	role, suspended := KeyRole(k.Role, k.OwnerRole, k.OwnerDeactivated)
	if suspended {
		return Key{}, ErrKeySuspended
	}
	return Key{ID: k.ID, OrgID: k.OrgID, OrgSlug: k.OrgSlug, OrgName: k.OrgName, Name: k.Name, Role: role}, nil
}

// forgetKeysOf drops the cached keys a user created, once a change to the
// user has committed, so it applies to their keys on this server at once.
func (s *Service) forgetKeysOf(userID uuid.UUID) {
	s.keys.Range(func(prefix, c any) bool {
		if row := c.(cachedKey).row; row.CreatedBy.Valid && row.CreatedBy.UUID == userID {
			s.forgetKey(prefix.(string))
		}
		return true
	})
}

// forgetKey drops a key's cached check, and lets the next request ask the
// database anew rather than wait for a lookup begun before the change.
func (s *Service) forgetKey(prefix string) {
	s.keys.Delete(prefix)
	s.keyLookups.Forget(prefix)
}

// KeyListing is an API key as the keys page lists it.
type KeyListing struct {
	db.APIKeyListRow
	ActsAs    auth.Role // its role capped by its creator's; "" while suspended
	Suspended bool      // its creator is deactivated
}

// ListAPIKeys returns the organisation's API keys, newest first, revoked
// ones included, each with the role it acts with.
func (s *Service) ListAPIKeys(ctx context.Context, orgID uuid.UUID) ([]KeyListing, error) {
	rows, err := db.New(s.Pool).APIKeyList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]KeyListing, len(rows))
	for i, r := range rows {
		out[i] = KeyListing{APIKeyListRow: r}
		out[i].ActsAs, out[i].Suspended = KeyRole(r.Role, r.OwnerRole, r.OwnerDeactivated)
	}
	return out, nil
}
