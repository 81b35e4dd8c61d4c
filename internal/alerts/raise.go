package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
)

// KindLoopRun is the alert a loop's failed run opens.
const KindLoopRun = "loop_run"

// RaiseTx opens an alert for an event, in the caller's transaction, with
// its webhook delivery: an open alert of the same key is brought up to
// date instead. The rules never resolve it; Settle does, when what
// follows the event clears it.
func (s *Service) RaiseTx(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, c Condition) error {
	q := db.New(tx)
	details, err := json.Marshal(c.Details)
	if err != nil {
		return err
	}
	now := time.Now()
	open, err := q.AlertGetOpenByKey(ctx, db.AlertGetOpenByKeyParams{OrgID: orgID, DedupKey: c.Key})
	if err == nil {
		return q.AlertUpdateSeen(ctx, db.AlertUpdateSeenParams{OrgID: orgID, ID: open.ID, Severity: c.Severity, Title: c.Title,
			Message: c.Message, Details: details, Now: now})
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	a, err := q.AlertInsert(ctx, db.AlertInsertParams{OrgID: orgID, Kind: c.Kind, Severity: c.Severity, DedupKey: c.Key,
		Title: c.Title, Message: c.Message, Details: details, Now: now})
	if err != nil {
		return err
	}
	if s.Jobs == nil {
		return nil
	}
	_, err = s.Jobs.InsertTx(ctx, tx, WebhookArgs{OrgID: a.OrgID, AlertID: a.ID}, nil)
	return err
}

// SettleTx resolves the open alert of an event's key, if there is one, in
// the caller's transaction.
func (s *Service) SettleTx(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, key string) error {
	return db.New(tx).AlertUpdateResolvedByKey(ctx, db.AlertUpdateResolvedByKeyParams{OrgID: orgID, DedupKey: key})
}
