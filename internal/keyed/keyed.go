// Package keyed holds what chat endpoints and serving targets share: a row
// an admin names, once per organisation, that keeps the API key of the
// server it calls sealed to the organisation and never shows it again.
// Sealing, inserting, refusing a taken name and auditing are one step here
// so that every kind of such row does them alike.
package keyed

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/secrets"
)

// Kind is one kind of keyed row.
type Kind struct {
	// Name binds the sealed key (a ciphertext copied to another kind's or
	// another organisation's row does not open) and names the row in the
	// audit log: its target type, and the action Name + ".create".
	Name string
	// Table is the row's table; its unique index on (org_id, name) is
	// Table + "_org_id_name_key".
	Table string
	// Noun names one row in a sentence: "an endpoint".
	Noun string
}

// Store keeps the rows of one kind, sealing their keys with Secrets (nil
// refuses rows with a key).
type Store struct {
	Kind
	Pool    *pgxpool.Pool
	Secrets *secrets.Box
}

// Sealed is a key as stored: both nil when the row has no key.
type Sealed struct {
	Ciphertext, Nonce []byte
}

// CheckKey refuses, on the "api_key" field, a key there is no secret key to
// seal with.
func (s Store) CheckKey(v *errs.Invalid, key string) {
	if key != "" && s.Secrets == nil {
		v.Add("api_key", "cannot be stored: no key to encrypt secrets is configured (CURATE_SECRET_KEY)")
	}
}

// Create seals key (when there is one) to the organisation, inserts the row
// with insert, and records its creation with details, in one transaction.
// A name the organisation already gave a row of this kind is refused on
// the "name" field. insert returns the row and its id.
func Create[T any](ctx context.Context, s Store, actor audit.Actor, orgID uuid.UUID, name, key string, details map[string]any,
	insert func(ctx context.Context, q *db.Queries, key Sealed) (T, uuid.UUID, error)) (T, error) {
	var out T
	var sealed Sealed
	if key != "" {
		if s.Secrets == nil {
			return out, errs.InvalidField("api_key", "cannot be stored: no key to encrypt secrets is configured (CURATE_SECRET_KEY)")
		}
		var err error
		if sealed.Ciphertext, sealed.Nonce, err = s.Secrets.Seal(key, s.binding(orgID)); err != nil {
			return out, err
		}
	}
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		row, id, err := insert(ctx, q, sealed)
		if errs.IsUnique(err, s.Table+"_org_id_name_key") {
			return errs.InvalidField("name", "%s named %q exists", s.Noun, name)
		}
		if err != nil {
			return err
		}
		out = row
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: s.Name + ".create", TargetType: s.Name,
			TargetID: id.String(), Details: details})
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// Open returns the key a row of the organisation keeps ("" when it keeps
// none).
func (s Store) Open(orgID uuid.UUID, key Sealed) (string, error) {
	if key.Ciphertext == nil {
		return "", nil
	}
	if s.Secrets == nil {
		return "", errors.New(s.Name + ": no key to open stored secrets (CURATE_SECRET_KEY)")
	}
	return s.Secrets.Open(key.Ciphertext, key.Nonce, s.binding(orgID))
}

// binding ties a sealed key to its kind and organisation.
func (s Store) binding(orgID uuid.UUID) []byte { return append([]byte(s.Name+":"), orgID[:]...) }
