package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/views"
)

// Home is the Curate tab's overview.
func (h *Handlers) Home(c echo.Context) error {
	caller := CallerOf(c)
	sum, err := h.Accounts.Summarize(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	v := views.HomeView{OrgName: caller.OrgName, Users: sum.Users, APIKeys: sum.ActiveKeys}
	return render(c, http.StatusOK, views.HomePage(h.page(c, "Overview", "home"), v))
}
