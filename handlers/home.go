package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/views"
)

// Home is the Curate tab's overview.
func (h *Handlers) Home(c echo.Context) error {
	caller := CallerOf(c)
	users, err := h.Q.UserList(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	keys, err := h.Q.APIKeyList(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	active := 0
	for _, k := range keys {
		if k.RevokedAt == nil {
			active++
		}
	}
	v := views.HomeView{OrgName: caller.OrgName, Users: len(users), APIKeys: active}
	return render(c, http.StatusOK, views.HomePage(h.page(c, "Overview", "home"), v))
}
