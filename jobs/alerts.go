package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/outbound"
)

// AlertsEvaluateArgs asks for the alert rules to be evaluated for every
// organisation; it runs every five minutes. Runs that overlap are harmless:
// the open-alert index admits one open alert per condition, so the later
// transaction fails and its job is retried.
type AlertsEvaluateArgs struct{}

// Kind names the job in River's table.
func (AlertsEvaluateArgs) Kind() string { return "alert_evaluate" }

// KindAliases keeps the jobs queued under the kind's earlier name worked;
// it can go once no row of river_job has that kind.
func (AlertsEvaluateArgs) KindAliases() []string { return []string{"alerts_evaluate"} }

// AlertsEvaluateWorker opens and resolves alerts; the evaluation queues a
// webhook delivery for each alert it opens.
type AlertsEvaluateWorker struct {
	river.WorkerDefaults[AlertsEvaluateArgs]
	Alerts *alerts.Service
	Log    *slog.Logger
	// Now is the evaluation time (default time.Now); tests move it.
	Now func() time.Time
}

// Work evaluates each organisation on its own; any organisation's error
// fails the job for a retry.
func (w *AlertsEvaluateWorker) Work(ctx context.Context, job *river.Job[AlertsEvaluateArgs]) error {
	now := time.Now()
	if w.Now != nil {
		now = w.Now()
	}
	results, err := w.Alerts.EvaluateAll(ctx, now)
	for org, res := range results {
		if len(res.Opened) > 0 || res.Resolved > 0 {
			w.Log.Info("alerts evaluated", "org", org, "opened", len(res.Opened), "resolved", res.Resolved)
		}
	}
	return err
}

// AlertWebhookWorker delivers an opened alert (alerts.WebhookArgs).
type AlertWebhookWorker struct {
	river.WorkerDefaults[alerts.WebhookArgs]
	Alerts *alerts.Service
}

// Work delivers the alert. An alert that is gone, a receiver that refuses
// the delivery itself (a 4xx other than 429), or an address the outbound
// policy refuses ends the job: a retry would meet the same answer, and the
// alerts page shows admins why.
func (w *AlertWebhookWorker) Work(ctx context.Context, job *river.Job[alerts.WebhookArgs]) error {
	err := w.Alerts.Deliver(ctx, job.Args.OrgID, job.Args.AlertID)
	if errors.Is(err, errs.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("alert %s no longer exists", job.Args.AlertID))
	}
	var (
		status   *outbound.StatusError
		refused  *outbound.RefusedError
		redirect *outbound.RedirectError
	)
	if errors.As(err, &status) && status.Status < 500 && status.Status != 429 || errors.As(err, &refused) || errors.As(err, &redirect) {
		return river.JobCancel(err)
	}
	return err
}
