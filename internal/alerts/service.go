package alerts

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/secrets"
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
	// Secrets seals the webhook signing secrets (CURATE_SECRET_KEY). It is
	// needed to make, seal and open one; without it a secret stored in the
	// clear before migration 00014 is left as it is.
	Secrets *secrets.Box
	// Outbound checks a webhook address when it is saved; nil allows
	// public addresses only.
	Outbound *outbound.Client
	// Webhooks sends deliveries; nil uses a sender with three quick tries
	// through Outbound, River's retries coming on top of them.
	Webhooks *webhook.Sender
	// Log receives the detail of failed deliveries; nil discards it.
	Log *slog.Logger
	// Monitors adds the production monitors' breaches to each evaluation;
	// nil adds none.
	Monitors Monitors
}

// Monitors reads conditions beyond the rules', in the evaluation's
// transaction (the production monitors, internal/monitors).
type Monitors interface {
	ConditionsTx(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, now time.Time) ([]Condition, error)
}

// New builds the alerts' service: jobs queues webhook deliveries, secrets
// seals the webhooks' signing secrets, out makes every call, monitors adds
// the production monitors' breaches to each evaluation (nil adds none),
// and log receives the detail of failed deliveries.
func New(pool *pgxpool.Pool, jobs jobq.Inserter, secrets *secrets.Box, out *outbound.Client, monitors Monitors, log *slog.Logger) *Service {
	return &Service{Pool: pool, Jobs: jobs, Secrets: secrets, Outbound: out, Monitors: monitors, Log: log}
}

// out is the outbound client for webhooks.
func (s *Service) out() *outbound.Client {
	if s.Outbound == nil {
		return &outbound.Client{}
	}
	return s.Outbound
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// Banners are the organisation's open, undismissed alerts, newest first,
// at most five: what every page shows above its content.
func (s *Service) Banners(ctx context.Context, orgID uuid.UUID) ([]db.AlertListBannersRow, error) {
	return db.New(s.Pool).AlertListBanners(ctx, orgID)
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
		a, err := q.AlertUpdateDismissed(ctx, db.AlertUpdateDismissedParams{OrgID: orgID, ID: id, DismissedBy: by})
		if errors.Is(err, pgx.ErrNoRows) {
			// Unknown, another organisation's, or already dismissed.
			if _, gerr := q.AlertGet(ctx, db.AlertGetParams{OrgID: orgID, ID: id}); gerr != nil {
				return errs.NotFound(gerr)
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
	st, row, err := s.load(ctx, db.New(s.Pool), orgID)
	return st, hasSecret(row), err
}

// SaveSettings validates and stores an organisation's rules and webhook
// address (not its secret); invalid settings change nothing. An address
// whose host resolves to one the outbound policy refuses is invalid; each
// delivery checks it again, since DNS may change.
func (s *Service) SaveSettings(ctx context.Context, actor audit.Actor, orgID uuid.UUID, st Settings) error {
	inv := &errs.Invalid{}
	if err := st.Validate(); err != nil && !errors.As(err, &inv) {
		return err
	}
	if st.WebhookURL != "" && inv.ByField()["webhook_url"] == "" {
		if err := s.out().CheckURL(ctx, st.WebhookURL); err != nil {
			inv.Add("webhook_url", "%s", outbound.Describe(err))
		}
	}
	if err := inv.Err(); err != nil {
		return err
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		_, err := q.AlertSettingsInsertOrUpdate(ctx, db.AlertSettingsInsertOrUpdateParams{
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
// stores it sealed and returns it: the caller shows it once, in that
// response only.
func (s *Service) RotateSecret(ctx context.Context, actor audit.Actor, orgID uuid.UUID) (string, error) {
	if s.Secrets == nil {
		return "", errNoKey
	}
	secret := webhook.NewSecret()
	ct, nonce, err := s.Secrets.Seal(secret, secretBinding(orgID))
	if err != nil {
		return "", err
	}
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.AlertSettingsUpdateSecret(ctx, db.AlertSettingsUpdateSecretParams{OrgID: orgID, Ciphertext: ct, Nonce: nonce}); err != nil {
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
