package handlers

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/webhook"
	"github.com/curate/curate/views"
)

const alertsPageSize = 50

// alertBanners are the organisation's open, undismissed alerts for the
// layout. A failure here must not take the page down with it: it is logged
// and the page shows no banners.
func (h *Handlers) alertBanners(c echo.Context, orgID uuid.UUID) []views.Alert {
	rows, err := h.Q.AlertBanners(ctx(c), orgID)
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

// Alerts lists the organisation's alerts, newest first.
func (h *Handlers) Alerts(c echo.Context) error {
	caller := CallerOf(c)
	p := db.AlertListParams{OrgID: caller.OrgID, RowLimit: alertsPageSize + 1}
	if cur := c.QueryParam("cursor"); cur != "" {
		t, id, err := decodeAlertCursor(cur)
		if err != nil {
			return errs.InvalidField("cursor", "is not a cursor this page gave out")
		}
		p.CursorTime, p.CursorID = &t, uuid.NullUUID{UUID: id, Valid: true}
	}
	rows, err := h.Q.AlertList(ctx(c), p)
	if err != nil {
		return err
	}
	v := views.AlertsView{CanDismiss: caller.Role.AtLeast(auth.Curator), IsAdmin: caller.Role.AtLeast(auth.Admin)}
	if len(rows) > alertsPageSize {
		last := rows[alertsPageSize-1]
		v.NextCursor = encodeAlertCursor(last.OpenedAt, last.ID)
		rows = rows[:alertsPageSize]
	}
	for _, r := range rows {
		row := views.AlertRow{ID: r.ID.String(), Kind: r.Kind, Severity: r.Severity, Title: r.Title, Message: r.Message,
			OpenedAt: views.When(r.OpenedAt), Dismissed: r.DismissedAt != nil, DismissedBy: r.DismissedByEmail}
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

func encodeAlertCursor(t time.Time, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.UTC().Format(time.RFC3339Nano) + "|" + id.String()))
}

func decodeAlertCursor(s string) (time.Time, uuid.UUID, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return time.Time{}, uuid.Nil, err
	}
	ts, ids, ok := strings.Cut(string(b), "|")
	if !ok {
		return time.Time{}, uuid.Nil, errors.New("no separator")
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, uuid.Nil, err
	}
	id, err := uuid.Parse(ids)
	return t, id, err
}

// AlertDismiss hides an open alert's banner. The alert stays open until its
// condition clears, so the same condition does not alert again meanwhile.
func (h *Handlers) AlertDismiss(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	err = db.InTx(ctx(c), h.Pool, func(_ pgx.Tx, q *db.Queries) error {
		a, err := q.AlertDismiss(ctx(c), db.AlertDismissParams{OrgID: caller.OrgID, ID: id, DismissedBy: uuid.NullUUID{UUID: caller.UserID, Valid: caller.UserID != uuid.Nil}})
		if errors.Is(err, pgx.ErrNoRows) {
			// Unknown, another organisation's, or already dismissed.
			if _, gerr := q.AlertGet(ctx(c), db.AlertGetParams{OrgID: caller.OrgID, ID: id}); gerr != nil {
				return errs.ErrNotFound
			}
			return nil
		}
		if err != nil {
			return err
		}
		return audit.Record(ctx(c), q, actor(c), audit.Entry{OrgID: caller.OrgID, Action: "alert.dismiss",
			TargetType: "alert", TargetID: a.ID.String(), Details: map[string]any{"kind": a.Kind, "title": a.Title}})
	})
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Dismissed the alert.")
	return redirect(c, "/alerts")
}

// AlertSettings shows the organisation's alert rules and webhook.
func (h *Handlers) AlertSettings(c echo.Context) error {
	s, row, err := alerts.Load(ctx(c), h.Q, CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return h.renderAlertSettings(c, http.StatusOK, views.AlertSettingsView{Form: alertForm(s), HasSecret: row.WebhookSecret != ""})
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
	s, err := parseAlertForm(form)
	if err == nil {
		err = s.Validate()
	}
	caller := CallerOf(c)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		_, row, lerr := alerts.Load(ctx(c), h.Q, caller.OrgID)
		if lerr != nil {
			return lerr
		}
		return h.renderAlertSettings(c, http.StatusUnprocessableEntity, views.AlertSettingsView{Form: form, Errors: invalid.ByField(), HasSecret: row.WebhookSecret != ""})
	}
	if err != nil {
		return err
	}
	err = db.InTx(ctx(c), h.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if _, err := alerts.Save(ctx(c), q, caller.OrgID, s); err != nil {
			return err
		}
		return audit.Record(ctx(c), q, actor(c), audit.Entry{OrgID: caller.OrgID, Action: "alerts.settings", TargetType: "alert_settings",
			TargetID: caller.OrgID.String(), Details: map[string]any{"enabled": s.Enabled, "rating_threshold": s.RatingThreshold,
				"window_hours": int(s.Window / time.Hour), "spike_factor": s.SpikeFactor, "webhook_url": s.WebhookURL}})
	})
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
	secret := webhook.NewSecret()
	err := db.InTx(ctx(c), h.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.AlertSettingsSetSecret(ctx(c), db.AlertSettingsSetSecretParams{OrgID: caller.OrgID, WebhookSecret: secret}); err != nil {
			return err
		}
		return audit.Record(ctx(c), q, actor(c), audit.Entry{OrgID: caller.OrgID, Action: "alerts.webhook_secret",
			TargetType: "alert_settings", TargetID: caller.OrgID.String()})
	})
	if err != nil {
		return err
	}
	s, _, err := alerts.Load(ctx(c), h.Q, caller.OrgID)
	if err != nil {
		return err
	}
	return h.renderAlertSettings(c, http.StatusCreated, views.AlertSettingsView{Form: alertForm(s), HasSecret: true, NewSecret: secret})
}
