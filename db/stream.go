package db

import (
	"context"

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
