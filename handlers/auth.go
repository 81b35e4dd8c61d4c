package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/views"
)

// LoginForm shows the sign-in page.
func (h *Handlers) LoginForm(c echo.Context) error {
	if CallerOf(c) != nil {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return render(c, http.StatusOK, views.LoginPage(h.page(c, "Sign in", ""), views.LoginView{Next: safeNext(c.QueryParam("next"))}))
}

// Login checks the credentials and starts a session.
func (h *Handlers) Login(c echo.Context) error {
	email := strings.TrimSpace(c.FormValue("email"))
	password := c.FormValue("password")
	next := safeNext(c.FormValue("next"))
	v := views.LoginView{Email: email, Next: next}

	if email == "" || password == "" || len(email) > 254 {
		v.Error = "Enter your e-mail and password."
		return render(c, http.StatusUnprocessableEntity, views.LoginPage(h.page(c, "Sign in", ""), v))
	}
	sess, err := h.Accounts.SignIn(ctx(c), accounts.Credentials{Email: email, Password: password, IP: c.RealIP(),
		UserAgent: c.Request().UserAgent()})
	var tooMany *errs.TooMany
	switch {
	case errors.Is(err, accounts.ErrBadCredentials):
		v.Error = "Wrong e-mail or password."
		return render(c, http.StatusUnauthorized, views.LoginPage(h.page(c, "Sign in", ""), v))
	case errors.As(err, &tooMany):
		v.Error = "Too many failed sign-ins. " + strings.ToUpper(tooMany.Message[:1]) + tooMany.Message[1:] + "."
		c.Response().Header().Set("Retry-After", "900")
		return render(c, http.StatusTooManyRequests, views.LoginPage(h.page(c, "Sign in", ""), v))
	case err != nil:
		return err
	}
	if err := h.Sessions.Start(c, sess.Token); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// Logout ends the session, on every server.
func (h *Handlers) Logout(c echo.Context) error {
	token, _ := h.Sessions.Token(c)
	if err := h.Accounts.SignOut(ctx(c), token, c.RealIP()); err != nil {
		return err
	}
	if err := h.Sessions.End(c); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "You are signed out.")
	return c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext keeps post-login redirects on this site: a path, with no
// scheme, no host, no "//" (a host to browsers), no backslash (a slash to
// browsers) and no control character (browsers drop tabs and newlines, so
// "/\t/evil.example" becomes "//evil.example").
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') ||
		strings.ContainsFunc(next, unicode.IsControl) {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return next
}
