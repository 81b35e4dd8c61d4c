package handlers

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/health"
)

// Healthz says the process is up.
func (h *Handlers) Healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// Readyz says whether the database and River's tables answer.
func (h *Handlers) Readyz(c echo.Context) error {
	err := h.Health.Check(ctx(c))
	if err == nil {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok", "database": "ok", "queue": "ok"})
	}
	h.Log.Warn("readyz", "err", err)
	var down *health.Down
	if errors.As(err, &down) && down.Part == health.Queue {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": "ok", "queue": "unreachable"})
	}
	return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": "unreachable"})
}
