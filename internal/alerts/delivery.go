package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/webhook"
)

// WebhookArgs asks for one alert to be sent to its organisation's webhook;
// the evaluation that opens the alert queues it.
type WebhookArgs struct {
	OrgID   uuid.UUID `json:"org_id"`
	AlertID uuid.UUID `json:"alert_id"`
}

// Kind names the job in River's table.
func (WebhookArgs) Kind() string { return "alert_deliver" }

// KindAliases keeps the jobs queued under the kind's earlier name worked;
// it can go once no row of river_job has that kind.
func (WebhookArgs) KindAliases() []string { return []string{"alert_webhook"} }

// InsertOpts gives a delivery River's retries over about a day on top of
// the sender's own quick ones.
func (WebhookArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 12} }

// WebhookPayload is the body of an alert delivery, in the Standard
// Webhooks shape: type, timestamp and data.
type WebhookPayload struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      WebhookData `json:"data"`
}

// WebhookData is the alert as a receiver sees it.
type WebhookData struct {
	ID       uuid.UUID      `json:"id"`
	OrgID    uuid.UUID      `json:"org_id"`
	Kind     string         `json:"kind"`
	Severity string         `json:"severity"`
	Title    string         `json:"title"`
	Message  string         `json:"message"`
	Details  map[string]any `json:"details"`
	OpenedAt time.Time      `json:"opened_at"`
}

// DeliveryError is a delivery that failed. Its Error is the sentence
// recorded on the alert, which the alerts page shows, and in River's job
// record: outbound.Describe's reason, never what the receiver answered nor
// a Go error. Err is the detail, which goes to the log.
type DeliveryError struct {
	Msg string
	Err error
}

func (e *DeliveryError) Error() string { return e.Msg }
func (e *DeliveryError) Unwrap() error { return e.Err }

// Deliver sends an opened alert to its organisation's webhook and marks it
// delivered. The alert's id is the delivery's webhook-id on every attempt,
// so receivers can drop repeats; an alert already delivered, or an
// organisation without a webhook address and secret, sends nothing. An
// alert that no longer exists is errs.ErrNotFound; a failed delivery is a
// *DeliveryError, recorded on the alert, which unwraps to the sender's
// error (a receiver's refusal is an *outbound.StatusError). The address is
// checked again on every attempt: it may resolve elsewhere than when it
// was saved.
func (s *Service) Deliver(ctx context.Context, orgID, alertID uuid.UUID) error {
	q := db.New(s.Pool)
	a, err := q.AlertGet(ctx, db.AlertGetParams{OrgID: orgID, ID: alertID})
	if err != nil {
		return errs.NotFound(err)
	}
	if a.WebhookDeliveredAt != nil {
		return nil
	}
	_, settings, err := s.load(ctx, q, a.OrgID)
	if err != nil {
		return err
	}
	secret, err := s.secret(settings)
	if err != nil {
		return err
	}
	if settings.WebhookUrl == "" || secret == "" {
		return nil
	}
	data := WebhookData{ID: a.ID, OrgID: a.OrgID, Kind: a.Kind, Severity: a.Severity, Title: a.Title,
		Message: a.Message, OpenedAt: a.OpenedAt.UTC()}
	if err := json.Unmarshal(a.Details, &data.Details); err != nil {
		return fmt.Errorf("alert %s details: %w", a.ID, err)
	}
	payload := WebhookPayload{Type: "alert.opened", Timestamp: a.OpenedAt.UTC(), Data: data}
	sender := s.Webhooks
	if sender == nil {
		sender = &webhook.Sender{MaxAttempts: 3, Outbound: s.Outbound}
	}
	if _, err := sender.Send(ctx, webhook.Endpoint{URL: settings.WebhookUrl, Secret: secret}, "alert_"+a.ID.String(), payload); err != nil {
		return s.deliveryFailed(ctx, q, a, err)
	}
	return q.AlertUpdateDelivered(ctx, db.AlertUpdateDeliveredParams{OrgID: a.OrgID, ID: a.ID})
}

// deliveryFailed logs a failed delivery with its detail (what the receiver
// answered, truncated), records the page's sentence on the alert and
// returns it as a DeliveryError.
func (s *Service) deliveryFailed(ctx context.Context, q *db.Queries, a db.Alert, err error) error {
	fail := &DeliveryError{Msg: "The webhook delivery failed: " + outbound.Describe(err), Err: err}
	attrs := []any{"org", a.OrgID, "alert", a.ID, "err", err}
	var status *outbound.StatusError
	if errors.As(err, &status) {
		attrs = append(attrs, "body", status.Body)
	}
	s.log().Warn("alert webhook delivery failed", attrs...)
	if rerr := q.AlertUpdateWebhookError(context.WithoutCancel(ctx), db.AlertUpdateWebhookErrorParams{
		OrgID: a.OrgID, ID: a.ID, WebhookError: fail.Msg}); rerr != nil {
		return errors.Join(fail, rerr)
	}
	return fail
}
