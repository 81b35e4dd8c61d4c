package alerts

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/webhook"
)

// ListName names the alerts list in its keyset cursors.
const ListName = "alerts"

// Service reads an organisation's alerts and changes them and their
// settings, each change audited in its own transaction; it evaluates the
// rules and delivers opened alerts to the organisation's webhook.
type Service struct {
	Pool *pgxpool.Pool
	// Jobs queues a webhook delivery for each alert an evaluation opens;
	// nil queues none (the demo seed, whose organisation has no webhook).
	Jobs jobq.Inserter
	// Webhooks sends deliveries; nil uses a sender with three quick tries,
	// River's retries coming on top of them.
	Webhooks *webhook.Sender
}

// Banners are the organisation's open, undismissed alerts, newest first,
// at most five: what every page shows above its content.
func (s *Service) Banners(ctx context.Context, orgID uuid.UUID) ([]db.AlertBannersRow, error) {
	return db.New(s.Pool).AlertBanners(ctx, orgID)
}

// Page is one keyset page of the alerts list.
type Page struct {
	Rows []db.AlertListRow
	Next *keyset.Cursor // nil on the last page
}

// List returns a page of the organisation's alerts, newest first.
func (s *Service) List(ctx context.Context, orgID uuid.UUID, cursor *keyset.Cursor, limit int) (Page, error) {
	at, id := cursor.Bounds()
	rows, err := db.New(s.Pool).AlertList(ctx, db.AlertListParams{OrgID: orgID, CursorTime: at, CursorID: id, RowLimit: int32(limit + 1)})
	if err != nil {
		return Page{}, err
	}
	var p Page
	p.Rows, p.Next = keyset.Page(rows, limit, func(r db.AlertListRow) keyset.Cursor { return keyset.Cursor{At: r.OpenedAt, ID: r.ID} })
	return p, nil
}

// Dismiss hides an open alert's banner. The alert stays open until its
// condition clears, so the same condition does not alert again meanwhile.
// Dismissing a dismissed alert changes nothing; an alert the organisation
// does not have is errs.ErrNotFound.
func (s *Service) Dismiss(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID) error {
	by := uuid.NullUUID{UUID: actor.ID, Valid: actor.Kind == "user" && actor.ID != uuid.Nil}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		a, err := q.AlertDismiss(ctx, db.AlertDismissParams{OrgID: orgID, ID: id, DismissedBy: by})
		if errors.Is(err, pgx.ErrNoRows) {
			// Unknown, another organisation's, or already dismissed.
			if _, gerr := q.AlertGet(ctx, db.AlertGetParams{OrgID: orgID, ID: id}); gerr != nil {
				return errs.ErrNotFound
			}
			return nil
		}
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "alert.dismiss",
			TargetType: "alert", TargetID: a.ID.String(), Details: map[string]any{"kind": a.Kind, "title": a.Title}})
	})
}

// Settings returns an organisation's alert settings (the defaults when it
// has not changed them) and whether it has a webhook signing secret. The
// secret itself is shown once, when it is made, and never read back.
func (s *Service) Settings(ctx context.Context, orgID uuid.UUID) (Settings, bool, error) {
	st, row, err := load(ctx, db.New(s.Pool), orgID)
	return st, row.WebhookSecret != "", err
}

// SaveSettings validates and stores an organisation's rules and webhook
// address (not its secret); invalid settings change nothing.
func (s *Service) SaveSettings(ctx context.Context, actor audit.Actor, orgID uuid.UUID, st Settings) error {
	if err := st.Validate(); err != nil {
		return err
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		_, err := q.AlertSettingsUpsert(ctx, db.AlertSettingsUpsertParams{
			OrgID: orgID, Enabled: st.Enabled, RatingThreshold: st.RatingThreshold, MinRatings: int32(st.MinRatings),
			WindowHours: int32(st.Window / time.Hour), BaselineDays: int32(st.BaselineDays), SpikeFactor: st.SpikeFactor,
			SpikeMinCount: int32(st.SpikeMinCount), WebhookUrl: st.WebhookURL,
		})
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "alerts.settings", TargetType: "alert_settings",
			TargetID: orgID.String(), Details: map[string]any{"enabled": st.Enabled, "rating_threshold": st.RatingThreshold,
				"window_hours": int(st.Window / time.Hour), "spike_factor": st.SpikeFactor, "webhook_url": st.WebhookURL}})
	})
}

// RotateSecret makes a new webhook signing secret, replacing the old one,
// and returns it: the caller shows it once, in that response only.
func (s *Service) RotateSecret(ctx context.Context, actor audit.Actor, orgID uuid.UUID) (string, error) {
	secret := webhook.NewSecret()
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.AlertSettingsSetSecret(ctx, db.AlertSettingsSetSecretParams{OrgID: orgID, WebhookSecret: secret}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "alerts.webhook_secret",
			TargetType: "alert_settings", TargetID: orgID.String()})
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}
