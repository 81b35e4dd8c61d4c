package feedback

import (
	"context"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/curate/curate/db"
)

// IngestBatchTx is IngestBatch inside the caller's transaction, so that many
// batches (a whole import file) commit together or not at all. Each batch
// runs in a savepoint: when a concurrent writer stores one of its external
// ids first, only that batch is rolled back and tried again.
func (s *Service) IngestBatchTx(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, source string, items []Item) (BatchResult, error) {
	rows, err := batchRows(ctx, db.New(tx), orgID, source, items)
	if err != nil {
		return BatchResult{}, err
	}
	return retryOnUnique(func() (res BatchResult, err error) {
		err = pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			res, err = copyRows(ctx, db.New(sp), orgID, rows)
			return err
		})
		return res, err
	})
}

// copyRows stores the rows whose external ids are not stored yet with COPY,
// linking each exact duplicate to the first row of its content (stored
// earlier, or earlier in this batch), using q's connection or transaction.
func copyRows(ctx context.Context, q *db.Queries, orgID uuid.UUID, rows []db.FeedbackInsertManyParams) (BatchResult, error) {
	var ext []string
	for _, r := range rows {
		if r.ExternalID.Valid {
			ext = append(ext, r.ExternalID.String)
		}
	}
	stored := map[string]bool{}
	if len(ext) > 0 {
		existing, err := q.FeedbackListExternalIDs(ctx, db.FeedbackListExternalIDsParams{OrgID: orgID, ExternalIds: ext})
		if err != nil {
			return BatchResult{}, err
		}
		for _, e := range existing {
			stored[e] = true
		}
	}
	var res BatchResult
	fresh := make([]db.FeedbackInsertManyParams, 0, len(rows))
	hashes := make([][]byte, 0, len(rows))
	for _, r := range rows {
		if r.ExternalID.Valid {
			if stored[r.ExternalID.String] {
				res.Duplicates++
				continue
			}
			stored[r.ExternalID.String] = true
		}
		fresh = append(fresh, r)
		hashes = append(hashes, r.ContentHash)
		res.IDs = append(res.IDs, r.ID)
	}
	if len(fresh) == 0 {
		return res, nil
	}
	// COPY takes no default for a column it names: items that do not say
	// when they were given were given now, the transaction's time.
	if slices.ContainsFunc(fresh, func(r db.FeedbackInsertManyParams) bool { return r.CreatedAt.IsZero() }) {
		now, err := q.FeedbackGetNow(ctx)
		if err != nil {
			return BatchResult{}, err
		}
		for i := range fresh {
			if fresh[i].CreatedAt.IsZero() {
				fresh[i].CreatedAt = now
			}
		}
	}
	firsts, err := q.FeedbackListFirstByHash(ctx, db.FeedbackListFirstByHashParams{OrgID: orgID, Hashes: hashes})
	if err != nil {
		return BatchResult{}, err
	}
	first := make(map[string]uuid.UUID, len(firsts))
	for _, f := range firsts {
		first[string(f.ContentHash)] = f.ID
	}
	for i := range fresh {
		h := string(fresh[i].ContentHash)
		if id, ok := first[h]; ok {
			fresh[i].DuplicateOf = uuid.NullUUID{UUID: id, Valid: true}
		} else {
			first[h] = fresh[i].ID
		}
	}
	n, err := q.FeedbackInsertMany(ctx, fresh)
	if err != nil {
		return BatchResult{}, err
	}
	if int(n) < len(fresh) {
		// The key trigger skipped a row whose external id a concurrent
		// writer stored after our check: fail as the unique index would,
		// so that the batch is tried again and counts it a duplicate.
		return BatchResult{}, &pgconn.PgError{Code: "23505", ConstraintName: "feedback_external_id_key",
			Message: "an external id of the batch was stored meanwhile"}
	}
	res.Inserted = int(n)
	return res, nil
}
