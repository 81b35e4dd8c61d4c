package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"

	"github.com/curate/curate/db/pgtest"
)

// The uuid encoding RegisterTypes installs writes the same values as
// pgx's own path through driver.Valuer: as parameters of uuid, text and
// uuid[] type, NULL for an invalid NullUUID, and through COPY.
func TestUUIDEncoding(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	u := uuid.MustParse("0190f5c2-7d3e-7a11-8c4d-5e6f708192a3")
	var asText, fromArray string
	var isNull bool
	err := pool.QueryRow(ctx, `SELECT $1::uuid::text, $2::text, ($3::uuid[])[2]::text, $4::uuid IS NULL`,
		u, u, []uuid.UUID{uuid.Nil, u}, uuid.NullUUID{}).Scan(&asText, &fromArray, &fromArray, &isNull)
	if err != nil {
		t.Fatal(err)
	}
	if asText != u.String() || fromArray != u.String() || !isNull {
		t.Errorf("got %q, %q, null %v; want %q and null", asText, fromArray, isNull, u)
	}
	var viaText string
	if err := pool.QueryRow(ctx, `SELECT $1::text`, u).Scan(&viaText); err != nil || viaText != u.String() {
		t.Errorf("as a text parameter: %q, %v", viaText, err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE ids (id uuid, maybe uuid)`); err != nil {
		t.Fatal(err)
	}
	rows := [][]any{{u, uuid.NullUUID{UUID: u, Valid: true}}, {uuid.Nil, uuid.NullUUID{}}}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"ids"}, []string{"id", "maybe"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := conn.QueryRow(ctx, `SELECT string_agg(id::text || '/' || coalesce(maybe::text, 'null'), ' ' ORDER BY id DESC) FROM ids`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := u.String() + "/" + u.String() + " " + uuid.Nil.String() + "/null"; got != want {
		t.Errorf("copied %q, want %q", got, want)
	}
}

// RegisterTypes puts uuids on the direct path: encoding one makes two
// allocations (the plan and the boxed value) where driver.Valuer made 19.
func TestUUIDEncodingAllocates(t *testing.T) {
	m := pgtype.NewMap()
	db.RegisterTypes(m)
	u, buf := uuid.New(), make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u, buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 || len(buf) != 16 {
		t.Errorf("%v allocations and %d bytes a uuid, want at most 3 and 16", allocs, len(buf))
	}
}
