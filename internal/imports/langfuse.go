package imports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/langfuse"
)

// ConnectionInput is what an admin enters for a Langfuse connection. An
// empty SecretKey keeps the stored one, so the form never has to show it.
type ConnectionInput struct {
	Host      string
	PublicKey string
	SecretKey string
}

// SyncError is a sync that failed on the Langfuse side (unreachable, keys
// refused, a broken answer) or on a stored secret that no longer decrypts.
// It is recorded on the connection, where the page shows it; nothing of the
// sync was stored.
type SyncError struct{ Err error }

func (e *SyncError) Error() string { return e.Err.Error() }
func (e *SyncError) Unwrap() error { return e.Err }

// scoresPage is the page size asked of Langfuse (its maximum).
const scoresPage = 100

// Connection returns the organisation's Langfuse connection, or
// errs.ErrNotFound when there is none.
func (s *Service) Connection(ctx context.Context, orgID uuid.UUID) (db.LangfuseConnection, error) {
	c, err := s.Q.LangfuseConnectionGet(ctx, orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, errs.ErrNotFound
	}
	return c, err
}

// SaveConnection creates or changes the organisation's connection, keeping
// the secret key encrypted, and audits the change ("langfuse.connection_save",
// without the secret). Field errors name host, public_key and secret_key.
func (s *Service) SaveConnection(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in ConnectionInput) (db.LangfuseConnection, error) {
	in.SecretKey = strings.TrimSpace(in.SecretKey)
	keptSecret := in.SecretKey == ""
	if keptSecret {
		old, err := s.Connection(ctx, orgID)
		switch {
		case errors.Is(err, errs.ErrNotFound):
			// langfuse.New reports the missing secret key.
		case err != nil:
			return db.LangfuseConnection{}, err
		default:
			if in.SecretKey, err = s.Secrets.Open(old.SecretCiphertext, old.SecretNonce, orgID[:]); err != nil {
				return db.LangfuseConnection{}, errs.InvalidField("secret_key", "%s", err.Error())
			}
		}
	}
	client, err := langfuse.New(in.Host, in.PublicKey, in.SecretKey, s.HTTP)
	if err != nil {
		return db.LangfuseConnection{}, err
	}
	ct, nonce, err := s.Secrets.Seal(in.SecretKey, orgID[:])
	if err != nil {
		return db.LangfuseConnection{}, err
	}
	var conn db.LangfuseConnection
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		var by uuid.NullUUID
		if actor.Kind == "user" {
			by = uuid.NullUUID{UUID: actor.ID, Valid: true}
		}
		var err error
		conn, err = q.LangfuseConnectionUpsert(ctx, db.LangfuseConnectionUpsertParams{OrgID: orgID, Host: client.Host(),
			PublicKey: strings.TrimSpace(in.PublicKey), SecretCiphertext: ct, SecretNonce: nonce, UpdatedBy: by})
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "langfuse.connection_save", TargetType: "langfuse_connection",
			TargetID: orgID.String(), Details: map[string]any{"host": conn.Host, "public_key": conn.PublicKey, "secret_changed": !keptSecret}})
	})
	return conn, err
}

// client opens the stored secret and builds a Langfuse client.
func (s *Service) client(conn db.LangfuseConnection) (*langfuse.Client, error) {
	secret, err := s.Secrets.Open(conn.SecretCiphertext, conn.SecretNonce, conn.OrgID[:])
	if err != nil {
		return nil, err
	}
	return langfuse.New(conn.Host, conn.PublicKey, secret, s.HTTP)
}

// TestConnection makes one cheap authenticated call to Langfuse and records
// its outcome as the connection's last error (cleared when it works). The
// returned error says what to fix.
func (s *Service) TestConnection(ctx context.Context, orgID uuid.UUID) error {
	conn, err := s.Connection(ctx, orgID)
	if err != nil {
		return err
	}
	client, err := s.client(conn)
	if err == nil {
		err = client.Check(ctx)
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if rerr := s.Q.LangfuseConnectionSetError(context.WithoutCancel(ctx), db.LangfuseConnectionSetErrorParams{OrgID: orgID, LastError: msg}); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// Sync imports the scores given since the last successful sync (all of
// them the first time). Each score is fetched once, mapped (see
// langfuse.Map: NUMERIC and BOOLEAN scores become ratings or thumbs,
// CORRECTION scores corrections) with its trace's input and output, and
// stored with external_id "langfuse:<score id>", so a score already stored
// is a duplicate and costs no trace fetch. Everything is read before
// anything is stored, and stored in one transaction with the connection's
// new sync position and counts: a sync that fails halfway stores nothing
// and the next one covers the same scores. Failures on the Langfuse side
// are recorded on the connection and returned as *SyncError.
func (s *Service) Sync(ctx context.Context, orgID uuid.UUID) (Summary, error) {
	conn, err := s.Connection(ctx, orgID)
	if err != nil {
		return Summary{}, err
	}
	if err := s.Q.LangfuseConnectionSyncStarted(ctx, orgID); err != nil {
		return Summary{}, err
	}
	sum, items, newest, err := s.collect(ctx, conn)
	if err == nil {
		err = s.storeSync(ctx, conn, items, newest, &sum)
	}
	if err != nil {
		if ctx.Err() == nil {
			var fail *SyncError
			if !errors.As(err, &fail) {
				err = fmt.Errorf("storing the sync: %w", err)
			}
		}
		rerr := s.Q.LangfuseConnectionSyncFailed(context.WithoutCancel(ctx), db.LangfuseConnectionSyncFailedParams{OrgID: orgID, LastError: err.Error()})
		return Summary{}, errors.Join(err, rerr)
	}
	return sum, nil
}

// collect reads the scores since the connection's sync position and maps
// those not stored yet. newest is the latest score timestamp seen.
func (s *Service) collect(ctx context.Context, conn db.LangfuseConnection) (sum Summary, items []feedback.Item, newest *time.Time, err error) {
	client, err := s.client(conn)
	if err != nil {
		return sum, nil, nil, &SyncError{err}
	}
	newest = conn.SyncFrom
	q := langfuse.ScoresQuery{Limit: scoresPage}
	if conn.SyncFrom != nil {
		q.FromTimestamp = *conn.SyncFrom
	}
	traces := map[string]langfuse.Trace{}
	queued := map[string]bool{}
	for {
		page, err := client.Scores(ctx, q)
		if err != nil {
			return sum, nil, nil, remote(ctx, err)
		}
		ids := make([]string, len(page.Scores))
		for i, sc := range page.Scores {
			ids[i] = "langfuse:" + sc.ID
		}
		existing, err := s.Q.FeedbackExistingExternalIDs(ctx, db.FeedbackExistingExternalIDsParams{OrgID: conn.OrgID, ExternalIds: ids})
		if err != nil {
			return sum, nil, nil, err
		}
		stored := map[string]bool{}
		for _, e := range existing {
			stored[e] = true
		}
		for i, sc := range page.Scores {
			if ts := sc.Timestamp; !ts.IsZero() && (newest == nil || ts.After(*newest)) {
				newest = &ts
			}
			if stored[ids[i]] || queued[ids[i]] {
				sum.Duplicates++
				continue
			}
			if ok, reason := langfuse.Mappable(sc); !ok {
				sum.skip(string(reason))
				continue
			}
			t, seen := traces[sc.TraceID]
			if !seen {
				t, err = client.Trace(ctx, sc.TraceID)
				if errors.Is(err, langfuse.ErrNotFound) {
					t, err = langfuse.Trace{}, nil // Map skips the score
				}
				if err != nil {
					return sum, nil, nil, remote(ctx, err)
				}
				traces[sc.TraceID] = t
			}
			f, ok, reason := langfuse.Map(sc, t)
			if !ok {
				sum.skip(string(reason))
				continue
			}
			it := langfuseItem(f)
			v := &errs.Invalid{}
			it.Validate(v, "")
			if v.Has() {
				sum.skip("not a valid feedback item (" + strings.Join(v.Fields(), ", ") + ")")
				continue
			}
			queued[ids[i]] = true
			items = append(items, it)
		}
		if page.NextCursor == "" {
			return sum, items, newest, nil
		}
		q.Cursor = page.NextCursor
	}
}

// remote wraps a Langfuse failure as a SyncError, leaving cancellation as is.
func remote(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return &SyncError{err}
}

// storeSync stores the items and advances the connection in one transaction.
func (s *Service) storeSync(ctx context.Context, conn db.LangfuseConnection, items []feedback.Item, newest *time.Time, sum *Summary) error {
	return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		stored, dups := 0, 0
		for start := 0; start < len(items); start += feedback.MaxBatch {
			res, err := s.Feedback.IngestBatchTx(ctx, tx, conn.OrgID, "langfuse", items[start:min(start+feedback.MaxBatch, len(items))])
			if err != nil {
				return err
			}
			stored += res.Inserted
			dups += res.Duplicates
		}
		sum.Stored, sum.Duplicates = stored, sum.Duplicates+dups
		reasons, err := json.Marshal(nonNilMap(sum.Reasons))
		if err != nil {
			return err
		}
		return db.New(tx).LangfuseConnectionSyncSucceeded(ctx, db.LangfuseConnectionSyncSucceededParams{OrgID: conn.OrgID,
			SyncFrom: newest, LastStored: int32(sum.Stored), LastDuplicates: int32(sum.Duplicates), LastSkipped: int32(sum.Skipped),
			LastSkipReasons: reasons})
	})
}

func langfuseItem(f langfuse.Feedback) feedback.Item {
	return feedback.Item{
		ExternalID: f.ExternalID, SessionID: f.SessionID, TraceID: f.TraceID, UserID: f.UserID,
		Query: f.Query, Response: f.Response, Model: f.Model, FeedbackType: f.Type, Rating: f.Rating,
		Correction: f.Correction, Comment: f.Comment, Tags: f.Tags,
	}
}

// RequestSync audits a person's "sync now" ("langfuse.sync_requested") and
// queues the sync job in the same transaction.
func (s *Service) RequestSync(ctx context.Context, actor audit.Actor, orgID uuid.UUID) error {
	if _, err := s.Connection(ctx, orgID); err != nil {
		return err
	}
	return db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		if err := audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "langfuse.sync_requested",
			TargetType: "langfuse_connection", TargetID: orgID.String()}); err != nil {
			return err
		}
		_, err := s.Jobs.InsertTx(ctx, tx, LangfuseSyncArgs{OrgID: orgID}, nil)
		return err
	})
}
