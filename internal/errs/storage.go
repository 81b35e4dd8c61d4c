package errs

import (
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// uniqueViolation is PostgreSQL's SQLSTATE for a unique index refusing a
// row (unique_violation).
const uniqueViolation = "23505"

// NotFound turns a query's "no rows" into ErrNotFound and passes any other
// error, and nil, through unchanged: a row that does not exist and a row
// of another organisation read alike, since every query filters on the
// organisation.
func NotFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// IsUnique reports whether err is a unique index refusing a row; when
// constraints are named, only a refusal by one of them counts. Naming the
// constraint keeps a message such as "the name is taken" from answering a
// refusal by another unique index of the same table.
func IsUnique(err error, constraints ...string) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != uniqueViolation {
		return false
	}
	return len(constraints) == 0 || slices.Contains(constraints, pg.ConstraintName)
}

// lockNotAvailable is PostgreSQL's SQLSTATE for a lock not granted within
// lock_timeout (lock_not_available).
const lockNotAvailable = "55P03"

// IsLockTimeout reports whether err is a statement giving up waiting for a
// lock (lock_timeout).
func IsLockTimeout(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == lockNotAvailable
}
