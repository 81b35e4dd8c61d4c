package db

import (
	"fmt"

	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/google/uuid"
)

// DatasetVersionItemEach streams one split of a version's contents in
// canonical order (the query DatasetVersionItemListSplit) and calls fn with
// each, without holding the split in memory: Postgres sends rows as fn
// consumes them. content is only valid until fn returns. The connection is
// busy until the last row: fn must not use q.
func (q *Queries) DatasetVersionItemEach(ctx context.Context, versionID uuid.UUID, split string, fn func(content []byte) error) error {
	rows, err := q.db.Query(ctx, datasetVersionItemListSplit, versionID, split)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows.RawValues()[0]); err != nil {
			return err
		}
	}
	return rows.Err()
}

// DatasetVersionItemEachFacts streams a keyset range of one split of a
// version in canonical order with each item's stored facts in a profile
// (the query DatasetVersionItemListFacts): fn gets the item's content
// hash and source, and either its facts or, where none are stored, its
// content. The slices are only valid until fn returns; the connection is
// busy until the last row. The statement is planned for each call's own
// values, not cached: a plan cached while the facts table was nearly
// empty scanned it whole for every item once it had grown.
func (q *Queries) DatasetVersionItemEachFacts(ctx context.Context, arg DatasetVersionItemListFactsParams, fn func(sha []byte, source uuid.UUID, facts, content []byte) error) error {
	rows, err := q.db.Query(ctx, datasetVersionItemListFacts, pgx.QueryExecModeDescribeExec,
		arg.OrgID, arg.Profile, arg.VersionID, arg.Split, arg.AfterSha, arg.AfterSource, arg.RowLimit)
	if err != nil {
		return err
	}
	defer rows.Close()
	for _, f := range rows.FieldDescriptions()[:3] {
		// bytea and uuid in text format would arrive as text.
		if f.Format != pgtype.BinaryFormatCode {
			return fmt.Errorf("item facts: column %s arrived in text format", f.Name)
		}
	}
	for rows.Next() {
		v := rows.RawValues()
		if len(v[1]) != 16 {
			return fmt.Errorf("item facts: source id of %d bytes", len(v[1]))
		}
		if err := fn(v[0], uuid.UUID(v[1]), v[2], v[3]); err != nil {
			return err
		}
	}
	return rows.Err()
}
