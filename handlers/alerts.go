package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/views"
)

const alertsPageSize = 50

// alertBanners are the organisation's open, undismissed alerts for the
// layout. A failure here must not take the page down with it: it is logged
// and the page shows no banners.
func (h *Handlers) alertBanners(c echo.Context, orgID uuid.UUID) []views.Alert {
	rows, err := h.Alerts.Banners(ctx(c), orgID)
	if err != nil {
		h.Log.Warn("loading alert banners", "err", err)
		return nil
	}
	out := make([]views.Alert, len(rows))
	for i, r := range rows {
		out[i] = views.Alert{Severity: r.Severity, Title: r.Title, Message: r.Message, Link: "/alerts"}
	}
	return out
}

// AlertList lists the organisation's alerts, newest first.
func (h *Handlers) AlertList(c echo.Context) error {
	caller := CallerOf(c)
	cursor, err := keyset.Parse(alerts.ListName, c.QueryParam("cursor"))
	if err != nil {
		return err
	}
	page, err := h.Alerts.List(ctx(c), caller.OrgID, cursor, alertsPageSize)
	if err != nil {
		return err
	}
	v := views.AlertsView{CanDismiss: caller.Role.AtLeast(auth.Curator), IsAdmin: caller.Role.AtLeast(auth.Admin)}
	if page.Next != nil {
		v.NextCursor = page.Next.Encode(alerts.ListName)
	}
	for _, r := range page.Rows {
		row := views.AlertRow{ID: r.ID.String(), Kind: r.Kind, Severity: r.Severity, Title: r.Title, Message: r.Message,
			OpenedAt: views.When(r.OpenedAt), Dismissed: r.DismissedAt != nil, DismissedBy: r.DismissedByEmail,
			WebhookError: r.WebhookError}
		if q := alerts.QueueFilter(r.Kind, r.Details); q != nil {
			row.QueueURL = feedbackQueueURL(q)
		}
		row.EvidenceURL = alerts.Evidence(r.Details)
		if r.ResolvedAt != nil {
			row.ResolvedAt = views.When(*r.ResolvedAt)
		}
		if row.Dismissed && row.DismissedBy == "" {
			row.DismissedBy = "a former user"
		}
		v.Rows = append(v.Rows, row)
	}
	return render(c, http.StatusOK, views.AlertsPage(h.page(c, "Alerts", "alerts"), v))
}

// AlertDismiss hides an open alert's banner; the alert itself stays open.
func (h *Handlers) AlertDismiss(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := h.Alerts.Dismiss(ctx(c), actor(c), CallerOf(c).OrgID, id); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Dismissed the alert.")
	return redirect(c, "/alerts")
}

// AlertSettings shows the organisation's alert rules and webhook.
func (h *Handlers) AlertSettings(c echo.Context) error {
	s, hasSecret, err := h.Alerts.Settings(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return h.renderAlertSettings(c, http.StatusOK, views.AlertSettingsView{Form: alertForm(s), HasSecret: hasSecret})
}

func (h *Handlers) renderAlertSettings(c echo.Context, status int, v views.AlertSettingsView) error {
	// The page may hold a secret: never cache it.
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, status, views.AlertSettingsPage(h.page(c, "Alert settings", "alerts"), v))
}

func alertForm(s alerts.Settings) views.AlertSettingsForm {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	return views.AlertSettingsForm{Enabled: s.Enabled, RatingThreshold: f(s.RatingThreshold), MinRatings: strconv.Itoa(s.MinRatings),
		WindowHours: strconv.Itoa(int(s.Window / time.Hour)), BaselineDays: strconv.Itoa(s.BaselineDays),
		SpikeFactor: f(s.SpikeFactor), SpikeMinCount: strconv.Itoa(s.SpikeMinCount), WebhookURL: s.WebhookURL}
}

// AlertSettingsSave validates and stores the rules and webhook URL.
func (h *Handlers) AlertSettingsSave(c echo.Context) error {
	form := views.AlertSettingsForm{Enabled: c.FormValue("enabled") == "true",
		RatingThreshold: strings.TrimSpace(c.FormValue("rating_threshold")), MinRatings: strings.TrimSpace(c.FormValue("min_ratings")),
		WindowHours: strings.TrimSpace(c.FormValue("window_hours")), BaselineDays: strings.TrimSpace(c.FormValue("baseline_days")),
		SpikeFactor: strings.TrimSpace(c.FormValue("spike_factor")), SpikeMinCount: strings.TrimSpace(c.FormValue("spike_min_count")),
		WebhookURL: strings.TrimSpace(c.FormValue("webhook_url"))}
	caller := CallerOf(c)
	s, err := parseAlertForm(form)
	if err == nil {
		err = h.Alerts.SaveSettings(ctx(c), actor(c), caller.OrgID, s)
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		_, hasSecret, lerr := h.Alerts.Settings(ctx(c), caller.OrgID)
		if lerr != nil {
			return lerr
		}
		return h.renderAlertSettings(c, http.StatusUnprocessableEntity, views.AlertSettingsView{Form: form, Errors: invalid.ByField(), HasSecret: hasSecret})
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Saved the alert settings.")
	return redirect(c, "/alerts/settings")
}

// parseAlertForm reads the form's numbers, naming each field that is not one.
func parseAlertForm(f views.AlertSettingsForm) (alerts.Settings, error) {
	v := &errs.Invalid{}
	num := func(field, s string) float64 {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			v.Add(field, "must be a number")
		}
		return x
	}
	whole := func(field, s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			v.Add(field, "must be a whole number")
		}
		return n
	}
	s := alerts.Settings{Enabled: f.Enabled, RatingThreshold: num("rating_threshold", f.RatingThreshold),
		MinRatings: whole("min_ratings", f.MinRatings), BaselineDays: whole("baseline_days", f.BaselineDays),
		SpikeFactor: num("spike_factor", f.SpikeFactor), SpikeMinCount: whole("spike_min_count", f.SpikeMinCount),
		WebhookURL: f.WebhookURL}
	s.Window = time.Duration(whole("window_hours", f.WindowHours)) * time.Hour
	return s, v.Err()
}

// AlertSecretCreate generates a new webhook signing secret and shows it
// once, in this response only.
func (h *Handlers) AlertSecretCreate(c echo.Context) error {
	caller := CallerOf(c)
	secret, err := h.Alerts.RotateSecret(ctx(c), actor(c), caller.OrgID)
	if err != nil {
		return err
	}
	s, _, err := h.Alerts.Settings(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	return h.renderAlertSettings(c, http.StatusCreated, views.AlertSettingsView{Form: alertForm(s), HasSecret: true, NewSecret: secret})
}
