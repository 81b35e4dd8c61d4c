package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/views"
)

// retentionSettings is how long the organisation keeps its feedback:
// retention_days, or null to keep it forever.
type retentionSettings struct {
	RetentionDays *int `json:"retention_days"`
}

// APIRetentionSettings reads the organisation's feedback retention.
func (h *Handlers) APIRetentionSettings(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	days, err := h.Retention.Days(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, retentionSettings{RetentionDays: days})
}

// APIRetentionSettingsSave sets the organisation's feedback retention; the
// maintenance job removes older feedback within the hour.
func (h *Handlers) APIRetentionSettingsSave(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in retentionSettings
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	if err := h.Retention.SetDays(ctx(c), actor(c), CallerOf(c).OrgID, in.RetentionDays); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, in)
}

// RetentionSettings is the page that shows and sets the organisation's
// feedback retention.
func (h *Handlers) RetentionSettings(c echo.Context) error {
	return h.renderRetention(c, http.StatusOK, nil, "")
}

// renderRetention shows the stored retention; with refused set, the field
// holds what was typed and the message is beside it.
func (h *Handlers) renderRetention(c echo.Context, status int, refused map[string]string, typed string) error {
	days, err := h.Retention.Days(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	m := views.RetentionView{Errors: map[string]string{}}
	if days != nil {
		m.Kept = strconv.Itoa(*days)
	}
	m.Days = m.Kept
	if refused != nil {
		m.Days, m.Errors = typed, refused
	}
	return render(c, status, views.RetentionPage(h.page(c, "Feedback retention", "stats"), m))
}

// RetentionSettingsSave sets the retention from the page's form: a number
// of days, or nothing to keep feedback forever.
func (h *Handlers) RetentionSettingsSave(c echo.Context) error {
	typed := strings.TrimSpace(c.FormValue("retention_days"))
	var days *int
	if typed != "" {
		n, err := strconv.Atoi(strings.ReplaceAll(typed, ",", ""))
		if err != nil {
			return h.renderRetention(c, http.StatusUnprocessableEntity,
				map[string]string{"retention_days": "must be a whole number of days, e.g. 400, or empty to keep feedback forever"}, typed)
		}
		days = &n
	}
	err := h.Retention.SetDays(ctx(c), actor(c), CallerOf(c).OrgID, days)
	var inv *errs.Invalid
	if errors.As(err, &inv) {
		return h.renderRetention(c, http.StatusUnprocessableEntity, inv.ByField(), typed)
	}
	if err != nil {
		return err
	}
	if days == nil {
		h.Sessions.Flash(c, "ok", "Feedback is kept forever.")
	} else {
		h.Sessions.Flash(c, "ok", "Feedback older than "+strconv.Itoa(*days)+" days will be removed within the hour.")
	}
	return redirect(c, "/stats/retention")
}
