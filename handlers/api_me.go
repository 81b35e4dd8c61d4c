package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// APIMe tells the caller who they are to the API.
func (h *Handlers) APIMe(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	caller := CallerOf(c)
	return c.JSON(http.StatusOK, map[string]string{"org": caller.OrgSlug, "role": string(caller.Role), "kind": caller.Kind})
}
