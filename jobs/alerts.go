package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/webhook"
)

// AlertsEvaluateArgs asks for the alert rules to be evaluated for every
// organisation; it runs every five minutes. Runs that overlap are harmless:
// the open-alert index admits one open alert per condition, so the later
// transaction fails and its job is retried.
type AlertsEvaluateArgs struct{}

// Kind names the job in River's table.
func (AlertsEvaluateArgs) Kind() string { return "alerts_evaluate" }

// AlertsEvaluateWorker opens and resolves alerts, and queues a webhook
// delivery for each alert it opens in the same transaction.
type AlertsEvaluateWorker struct {
	river.WorkerDefaults[AlertsEvaluateArgs]
	Pool *pgxpool.Pool
	Log  *slog.Logger
	// Now is the evaluation time (default time.Now); tests move it.
	Now func() time.Time
}

// Work evaluates each organisation on its own, so one failing does not
// hold back the others; the first error fails the job for a retry.
func (w *AlertsEvaluateWorker) Work(ctx context.Context, job *river.Job[AlertsEvaluateArgs]) error {
	now := time.Now()
	if w.Now != nil {
		now = w.Now()
	}
	orgs, err := db.New(w.Pool).AlertOrgIDs(ctx)
	if err != nil {
		return err
	}
	ev := &alerts.Evaluator{Pool: w.Pool}
	queue := func(ctx context.Context, tx pgx.Tx, a db.Alert) error {
		_, err := river.ClientFromContext[pgx.Tx](ctx).InsertTx(ctx, tx, AlertWebhookArgs{OrgID: a.OrgID, AlertID: a.ID}, nil)
		return err
	}
	var errs []error
	for _, org := range orgs {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := ev.EvaluateOrg(ctx, org, now, queue)
		if err != nil {
			errs = append(errs, fmt.Errorf("organisation %s: %w", org, err))
			continue
		}
		if len(res.Opened) > 0 || res.Resolved > 0 {
			w.Log.Info("alerts evaluated", "org", org, "opened", len(res.Opened), "resolved", res.Resolved)
		}
	}
	return errors.Join(errs...)
}

// AlertWebhookArgs asks for one alert to be sent to its organisation's
// webhook.
type AlertWebhookArgs struct {
	OrgID   uuid.UUID `json:"org_id"`
	AlertID uuid.UUID `json:"alert_id"`
}

// Kind names the job in River's table.
func (AlertWebhookArgs) Kind() string { return "alert_webhook" }

// InsertOpts gives a delivery River's retries over about a day on top of
// the sender's own quick ones.
func (AlertWebhookArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 12} }

// AlertWebhookPayload is the body of an alert delivery, in the Standard
// Webhooks shape: type, timestamp and data.
type AlertWebhookPayload struct {
	Type      string           `json:"type"`
	Timestamp time.Time        `json:"timestamp"`
	Data      AlertWebhookData `json:"data"`
}

// AlertWebhookData is the alert as a receiver sees it.
type AlertWebhookData struct {
	ID       uuid.UUID      `json:"id"`
	OrgID    uuid.UUID      `json:"org_id"`
	Kind     string         `json:"kind"`
	Severity string         `json:"severity"`
	Title    string         `json:"title"`
	Message  string         `json:"message"`
	Details  map[string]any `json:"details"`
	OpenedAt time.Time      `json:"opened_at"`
}

// AlertWebhookWorker delivers an opened alert. The alert's id is the
// delivery's webhook-id on every attempt, so receivers can drop repeats; a
// delivered alert is marked and not sent again.
type AlertWebhookWorker struct {
	river.WorkerDefaults[AlertWebhookArgs]
	Pool   *pgxpool.Pool
	Sender *webhook.Sender
}

// Work sends the alert, or does nothing when the organisation has no
// webhook or the alert was already delivered.
func (w *AlertWebhookWorker) Work(ctx context.Context, job *river.Job[AlertWebhookArgs]) error {
	q := db.New(w.Pool)
	a, err := q.AlertGet(ctx, db.AlertGetParams{OrgID: job.Args.OrgID, ID: job.Args.AlertID})
	if errors.Is(err, pgx.ErrNoRows) {
		return river.JobCancel(fmt.Errorf("alert %s no longer exists", job.Args.AlertID))
	}
	if err != nil {
		return err
	}
	if a.WebhookDeliveredAt != nil {
		return nil
	}
	_, settings, err := alerts.Load(ctx, q, a.OrgID)
	if err != nil {
		return err
	}
	if settings.WebhookUrl == "" || settings.WebhookSecret == "" {
		return nil
	}
	data := AlertWebhookData{ID: a.ID, OrgID: a.OrgID, Kind: a.Kind, Severity: a.Severity, Title: a.Title,
		Message: a.Message, OpenedAt: a.OpenedAt.UTC()}
	if err := json.Unmarshal(a.Details, &data.Details); err != nil {
		return fmt.Errorf("alert %s details: %w", a.ID, err)
	}
	payload := AlertWebhookPayload{Type: "alert.opened", Timestamp: a.OpenedAt.UTC(), Data: data}
	sender := w.Sender
	if sender == nil {
		sender = &webhook.Sender{MaxAttempts: 3}
	}
	_, err = sender.Send(ctx, webhook.Endpoint{URL: settings.WebhookUrl, Secret: settings.WebhookSecret}, "alert_"+a.ID.String(), payload)
	var status *webhook.StatusError
	if errors.As(err, &status) && status.StatusCode < 500 && status.StatusCode != 429 {
		// The receiver refuses this delivery; retrying would be refused alike.
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	return q.AlertMarkDelivered(ctx, db.AlertMarkDeliveredParams{OrgID: a.OrgID, ID: a.ID})
}
