package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Healthz says the process is up.
func (h *Handlers) Healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// Readyz says whether the database and River's tables answer.
func (h *Handlers) Readyz(c echo.Context) error {
	cctx, cancel := context.WithTimeout(ctx(c), 2*time.Second)
	defer cancel()
	if err := h.Pool.Ping(cctx); err != nil {
		h.Log.Warn("readyz: database", "err", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": "unreachable"})
	}
	v, err := h.Q.RiverSchemaVersion(cctx)
	if err != nil || v == 0 {
		h.Log.Warn("readyz: river", "err", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": "ok", "queue": "unreachable"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok", "database": "ok", "queue": "ok"})
}
