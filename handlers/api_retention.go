package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"
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
