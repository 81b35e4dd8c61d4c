package handlers

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/views"
)

// Account shows the signed-in user's own page: where they are signed in,
// signing out everywhere, and changing their password.
func (h *Handlers) Account(c echo.Context) error {
	return h.renderAccount(c, http.StatusOK, nil)
}

func (h *Handlers) renderAccount(c echo.Context, status int, fieldErrs map[string]string) error {
	caller, err := sessionCaller(c)
	if err != nil {
		return err
	}
	token, _ := h.Sessions.Token(c)
	list, err := h.Accounts.ListSessions(ctx(c), caller.UserID, token)
	if err != nil {
		return err
	}
	v := views.AccountView{Email: caller.Label, Role: string(caller.Role), Org: caller.OrgName, Errors: fieldErrs}
	for _, s := range list {
		v.Sessions = append(v.Sessions, views.SessionRow{CreatedAt: views.When(s.CreatedAt), LastSeenAt: views.When(s.LastSeenAt),
			UserAgent: s.UserAgent, IP: s.IP, Current: s.Current})
	}
	return render(c, status, views.AccountPage(h.page(c, "Your account", ""), v))
}

// SignOutEverywhere ends every session of the signed-in user, on every
// server, this browser's included.
func (h *Handlers) SignOutEverywhere(c echo.Context) error {
	caller, err := sessionCaller(c)
	if err != nil {
		return err
	}
	if err := h.Accounts.SignOutEverywhere(ctx(c), actor(c), caller.OrgID, caller.UserID); err != nil {
		return err
	}
	if err := h.Sessions.End(c); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "You are signed out everywhere.")
	return redirect(c, "/login")
}

// AccountPassword changes the signed-in user's password; every other
// browser is signed out and this one gets a new session.
func (h *Handlers) AccountPassword(c echo.Context) error {
	caller, err := sessionCaller(c)
	if err != nil {
		return err
	}
	in := accounts.PasswordChange{Current: c.FormValue("current_password"), New: c.FormValue("new_password"),
		UserAgent: c.Request().UserAgent()}
	sess, err := h.Accounts.ChangePassword(ctx(c), actor(c), caller.OrgID, caller.UserID, in)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderAccount(c, http.StatusUnprocessableEntity, invalid.ByField())
	}
	if err != nil {
		return err
	}
	if err := h.Sessions.Start(c, sess.Token); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Your password is changed; every other browser is signed out.")
	return redirect(c, "/account")
}

// sessionCaller is the caller of a page about one's own account: a signed-in
// user. API keys reach only /api, so this holds on every route using it.
func sessionCaller(c echo.Context) (*Caller, error) {
	caller := CallerOf(c)
	if caller == nil || caller.Kind != "session" {
		return nil, echo.NewHTTPError(http.StatusUnauthorized)
	}
	return caller, nil
}
