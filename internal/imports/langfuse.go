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
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/secrets"
)

// ConnectionInput is what an admin enters for a Langfuse connection. An
// empty SecretKey keeps the stored one, so the form never has to show it.
type ConnectionInput struct {
	Host      string
	PublicKey string
	SecretKey string
}

// LangfuseError is a call to Langfuse that failed (unreachable, an address
// the outbound policy refuses, keys refused, a broken answer) or a stored
// secret that no longer decrypts. Its Error is the sentence recorded on the
// connection and shown on the page: what Curate was doing and why it
// failed, never the remote server's words nor a Go error; Err is the
// detail, which goes to the log. A sync that fails so stored nothing.
type LangfuseError struct {
	Msg string
	Err error
}

func (e *LangfuseError) Error() string { return e.Msg }
func (e *LangfuseError) Unwrap() error { return e.Err }

// failed logs a failed call to Langfuse with its detail (the remote body
// included, truncated) and returns it as a LangfuseError.
func (s *Service) failed(orgID uuid.UUID, doing string, err error) *LangfuseError {
	msg := langfuse.Describe(err)
	if errors.Is(err, secrets.ErrDecrypt) {
		msg = err.Error() // Curate's own sentence, saying what to do
	}
	attrs := []any{"org", orgID, "err", err}
	var serr *langfuse.StatusError
	if errors.As(err, &serr) {
		attrs = append(attrs, "body", serr.Body)
	}
	s.Log.Warn("langfuse call failed", append([]any{"doing", doing}, attrs...)...)
	return &LangfuseError{Msg: doing + " failed: " + msg, Err: err}
}

// out is the outbound client for Langfuse.
func (s *Service) out() *outbound.Client {
	if s.Outbound == nil {
		return &outbound.Client{}
	}
	return s.Outbound
}

// scoresPage is the page size asked of Langfuse (its maximum).
const scoresPage = 100

// Connection returns the organisation's Langfuse connection, or
// errs.ErrNotFound when there is none.
func (s *Service) Connection(ctx context.Context, orgID uuid.UUID) (db.LangfuseConnection, error) {
	c, err := s.Q.LangfuseConnectionGet(ctx, orgID)
	return c, errs.NotFound(err)
}

// SaveConnection creates or changes the organisation's connection, keeping
// the secret key encrypted, and audits the change ("langfuse.connection_save",
// without the secret). Field errors name host, public_key and secret_key; a
// host that resolves to an address the outbound policy refuses is one. The
// address is checked again on every call, since DNS may change.
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
	client, err := langfuse.New(in.Host, in.PublicKey, in.SecretKey, s.Outbound)
	inv := &errs.Invalid{}
	if err != nil && !errors.As(err, &inv) {
		return db.LangfuseConnection{}, err
	}
	if inv.ByField()["host"] == "" {
		if err := s.out().CheckURL(ctx, strings.TrimSpace(in.Host)); err != nil {
			inv.Add("host", "%s", outbound.Describe(err))
		}
	}
	if err := inv.Err(); err != nil {
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
		conn, err = q.LangfuseConnectionInsertOrUpdate(ctx, db.LangfuseConnectionInsertOrUpdateParams{OrgID: orgID, Host: client.Host(),
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
	return langfuse.New(conn.Host, conn.PublicKey, secret, s.Outbound)
}

// TestConnection makes one cheap authenticated call to Langfuse and records
// its outcome as the connection's last error (cleared when it works). A
// failure is a *LangfuseError saying what to fix.
func (s *Service) TestConnection(ctx context.Context, orgID uuid.UUID) error {
	conn, err := s.Connection(ctx, orgID)
	if err != nil {
		return err
	}
	var fail error // a *LangfuseError, or nil
	client, err := s.client(conn)
	if err != nil {
		fail = s.failed(orgID, "Opening the stored secret key", err)
	} else if err := client.Check(ctx); err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		fail = s.failed(orgID, "Testing the connection", err)
	}
	msg := ""
	if fail != nil {
		msg = fail.Error()
	}
	if rerr := s.Q.LangfuseConnectionUpdateError(context.WithoutCancel(ctx), db.LangfuseConnectionUpdateErrorParams{OrgID: orgID, LastError: msg}); rerr != nil {
		return errors.Join(fail, rerr)
	}
	return fail
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
// are recorded on the connection and returned as *LangfuseError; the
// address is checked on every call, so a host whose name now resolves to a
// refused address fails here even though it was allowed when saved.
func (s *Service) Sync(ctx context.Context, orgID uuid.UUID) (Summary, error) {
	conn, err := s.Connection(ctx, orgID)
	if err != nil {
		return Summary{}, err
	}
	if err := s.Q.LangfuseConnectionUpdateSyncStarted(ctx, orgID); err != nil {
		return Summary{}, err
	}
	sum, items, newest, err := s.collect(ctx, conn)
	if err == nil {
		err = s.storeSync(ctx, conn, items, newest, &sum)
	}
	if err != nil {
		// The page shows what is recorded: never a Go error, whose text may
		// hold addresses, nor what Langfuse said.
		var fail *LangfuseError
		msg := ""
		switch {
		case errors.As(err, &fail):
			msg = fail.Msg
		case ctx.Err() != nil:
			msg = "The sync was interrupted; the next one covers the same scores."
		default:
			s.Log.Error("langfuse: storing the sync failed", "org", orgID, "err", err)
			msg = "Storing the sync failed; the server's log has the detail. The next sync covers the same scores."
			err = fmt.Errorf("storing the sync: %w", err)
		}
		rerr := s.Q.LangfuseConnectionUpdateSyncFailed(context.WithoutCancel(ctx), db.LangfuseConnectionUpdateSyncFailedParams{OrgID: orgID, LastError: msg})
		return Summary{}, errors.Join(err, rerr)
	}
	return sum, nil
}

// collect reads the scores since the connection's sync position and maps
// those not stored yet. newest is the latest score timestamp seen.
func (s *Service) collect(ctx context.Context, conn db.LangfuseConnection) (sum Summary, items []feedback.Item, newest *time.Time, err error) {
	client, err := s.client(conn)
	if err != nil {
		return sum, nil, nil, s.failed(conn.OrgID, "Opening the stored secret key", err)
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
			return sum, nil, nil, s.remote(ctx, conn.OrgID, "Reading scores", err)
		}
		ids := make([]string, len(page.Scores))
		for i, sc := range page.Scores {
			ids[i] = "langfuse:" + sc.ID
		}
		existing, err := s.Q.FeedbackListExternalIDs(ctx, db.FeedbackListExternalIDsParams{OrgID: conn.OrgID, ExternalIds: ids})
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
					return sum, nil, nil, s.remote(ctx, conn.OrgID, "Reading a trace", err)
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

// remote turns a Langfuse failure into a LangfuseError, leaving
// cancellation as is.
func (s *Service) remote(ctx context.Context, orgID uuid.UUID, doing string, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return s.failed(orgID, doing, err)
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
		return db.New(tx).LangfuseConnectionUpdateSyncSucceeded(ctx, db.LangfuseConnectionUpdateSyncSucceededParams{OrgID: conn.OrgID,
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
// queues the sync job in the same transaction. It answers false when a
// sync was already waiting or running, so no other was queued (River marks
// a job finished a moment after its work returns, so this can also happen
// just after a sync has ended).
func (s *Service) RequestSync(ctx context.Context, actor audit.Actor, orgID uuid.UUID) (bool, error) {
	if _, err := s.Connection(ctx, orgID); err != nil {
		return false, err
	}
	queued := false
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		if err := audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "langfuse.sync_requested",
			TargetType: "langfuse_connection", TargetID: orgID.String()}); err != nil {
			return err
		}
		res, err := s.Jobs.InsertTx(ctx, tx, LangfuseSyncArgs{OrgID: orgID}, nil)
		queued = err == nil && !res.UniqueSkippedAsDuplicate
		return err
	})
	return queued, err
}
