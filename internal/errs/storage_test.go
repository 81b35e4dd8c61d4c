package errs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/errs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A unique index's refusal is recognised by PostgreSQL's own error, with
// the index it came from; "no rows" reads as not found and nothing else
// does.
func TestStorageErrors(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE things (id int PRIMARY KEY, name text NOT NULL);
		CREATE UNIQUE INDEX things_name_key ON things (lower(name))`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO things VALUES (1, 'a')`); err != nil {
		t.Fatal(err)
	}
	_, byName := pool.Exec(ctx, `INSERT INTO things VALUES (2, 'A')`)
	_, byKey := pool.Exec(ctx, `INSERT INTO things VALUES (1, 'b')`)
	_, notNull := pool.Exec(ctx, `INSERT INTO things VALUES (3, NULL)`)
	for _, tc := range []struct {
		name        string
		err         error
		constraints []string
		want        bool
	}{
		{"any unique index", byName, nil, true},
		{"the index named", byName, []string{"things_name_key"}, true},
		{"one of the indexes named", byKey, []string{"things_name_key", "things_pkey"}, true},
		{"another index", byKey, []string{"things_name_key"}, false},
		{"not a unique violation", notNull, nil, false},
		{"no error", nil, nil, false},
	} {
		if got := errs.IsUnique(tc.err, tc.constraints...); got != tc.want {
			t.Errorf("%s: IsUnique(%v, %v) = %v", tc.name, tc.err, tc.constraints, got)
		}
	}

	var id int
	missing := pool.QueryRow(ctx, `SELECT id FROM things WHERE id = 9`).Scan(&id)
	if got := errs.NotFound(missing); got != errs.ErrNotFound {
		t.Errorf("NotFound(no rows) = %v", got)
	}
	if got := errs.NotFound(byName); got != byName {
		t.Errorf("NotFound passed %v as %v", byName, got)
	}
	if got := errs.NotFound(nil); got != nil {
		t.Errorf("NotFound(nil) = %v", got)
	}
	if errors.Is(errs.NotFound(notNull), errs.ErrNotFound) {
		t.Error("a refused insert reads as not found")
	}
}
