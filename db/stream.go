package db

import (
	"fmt"

	"context"

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

// DatasetVersionItemEachFacts streams one split of a version in canonical
// order with each item's stored facts in a profile (the query
// DatasetVersionItemListFacts): fn gets the item's content hash and either
// its facts or, where none are stored, its content. The slices are only
// valid until fn returns; the connection is busy until the last row.
func (q *Queries) DatasetVersionItemEachFacts(ctx context.Context, arg DatasetVersionItemListFactsParams, fn func(sha, facts, content []byte) error) error {
	rows, err := q.db.Query(ctx, datasetVersionItemListFacts, arg.OrgID, arg.Profile, arg.VersionID, arg.Split)
	if err != nil {
		return err
	}
	defer rows.Close()
	for _, f := range rows.FieldDescriptions()[:2] {
		// bytea in text format would arrive hex-encoded.
		if f.Format != pgtype.BinaryFormatCode {
			return fmt.Errorf("item facts: column %s arrived in text format", f.Name)
		}
	}
	for rows.Next() {
		v := rows.RawValues()
		if err := fn(v[0], v[1], v[2]); err != nil {
			return err
		}
	}
	return rows.Err()
}
