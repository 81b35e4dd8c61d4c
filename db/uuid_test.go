package db_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db/pgtest"
)

// A pool's connections write and read uuid.UUID as 16 bytes, and every
// other way of passing a uuid works as before: a pointer, a nil pointer,
// NullUUID, an array, text compared with a uuid; NULL read into a
// uuid.UUID gives the zero id.
func TestUUIDCodec(t *testing.T) {
	pool := pgtest.NewDB(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	m := conn.Conn().TypeMap()
	if got := fmt.Sprintf("%T", m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, uuid.UUID{})); got != "db.uuidEncodeBinary" {
		t.Errorf("encode plan for uuid.UUID: %s, want db.uuidEncodeBinary", got)
	}
	var u uuid.UUID
	if got := fmt.Sprintf("%T", m.PlanScan(pgtype.UUIDOID, pgtype.BinaryFormatCode, &u)); got != "db.uuidScanBinary" {
		t.Errorf("scan plan for *uuid.UUID: %s, want db.uuidScanBinary", got)
	}

	id := uuid.MustParse("0b9c3a57-2f1e-4d6a-9c1b-7e2f0a4d5c68")
	var back uuid.UUID
	var text string
	if err := pool.QueryRow(ctx, `SELECT $1::uuid, $1::uuid::text`, id).Scan(&back, &text); err != nil {
		t.Fatal(err)
	}
	if back != id || text != id.String() {
		t.Errorf("round trip: %s, %s; want %s", back, text, id)
	}
	var isNull bool
	var none *uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT $1::uuid IS NULL`, none).Scan(&isNull); err != nil || !isNull {
		t.Errorf("nil *uuid.UUID: null %v, %v", isNull, err)
	}
	if err := pool.QueryRow(ctx, `SELECT $1::uuid = $2::uuid`, &id, id.String()).Scan(&isNull); err != nil || !isNull {
		t.Errorf("*uuid.UUID against text: equal %v, %v", isNull, err)
	}
	var null uuid.NullUUID
	back = id
	if err := pool.QueryRow(ctx, `SELECT NULL::uuid, NULL::uuid`).Scan(&back, &null); err != nil {
		t.Fatal(err)
	}
	if back != (uuid.UUID{}) || null.Valid {
		t.Errorf("NULL read as %s and %+v, want the zero id and an invalid NullUUID", back, null)
	}
	other := uuid.New()
	var ids []uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT array_agg(x ORDER BY ord) FROM unnest($1::uuid[]) WITH ORDINALITY AS t(x, ord)`, []uuid.UUID{id, other}).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != id || ids[1] != other {
		t.Errorf("array round trip: %v", ids)
	}
}
