package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolConfig parses a database URL into a pool configuration whose
// connections read and write uuid.UUID directly (RegisterUUID).
func PoolConfig(url string) (*pgxpool.Config, error) {
	c, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	c.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		RegisterUUID(conn.TypeMap())
		return nil
	}
	return c, nil
}

// RegisterUUID makes a connection's type map encode and scan uuid.UUID as
// the 16 bytes it is. Without it, pgx takes a uuid.UUID parameter through
// its driver.Valuer: to text, a failed binary encode (an error formatted
// and dropped), a scan of the text and a second encode; and a uuid.UUID
// column through its sql.Scanner, as text parsed again. Every statement
// carries an organisation's id, so that was 7% of the CPU profile
// on a new unit's assignment.
//
// Arrays of uuid keep pgx's own element type, registered before this.
func RegisterUUID(m *pgtype.Map) {
	m.RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
}

type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return uuidEncodeBinary{}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return uuidScanBinary{}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type uuidEncodeBinary struct{}

func (uuidEncodeBinary) Encode(value any, buf []byte) ([]byte, error) {
	u := value.(uuid.UUID)
	return append(buf, u[:]...), nil
}

type uuidScanBinary struct{}

func (uuidScanBinary) Scan(src []byte, dst any) error {
	if src == nil { // NULL reads as the zero id, as a new uuid.UUID's Scan leaves it
		*dst.(*uuid.UUID) = uuid.UUID{}
		return nil
	}
	if len(src) != 16 {
		return fmt.Errorf("invalid length for uuid: %d", len(src))
	}
	copy(dst.(*uuid.UUID)[:], src)
	return nil
}
