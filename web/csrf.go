package web

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/curate/curate/handlers"
)

// csrfCookie keeps the browser's CSRF token; forms and HTMX requests send
// it back as _csrf or X-CSRF-Token.
const (
	csrfCookie    = "curate_csrf"
	csrfCookieAge = 24 * time.Hour // echo's default
)

// csrf checks the token of every unsafe request a browser sends. A missing
// token is refused as a wrong one is, with a 403: both are a request the
// page did not make.
func csrf(tls bool) echo.MiddlewareFunc {
	return middleware.CSRFWithConfig(middleware.CSRFConfig{
		TokenLookup:    "header:X-CSRF-Token,form:_csrf",
		CookieName:     csrfCookie,
		CookiePath:     "/",
		CookieMaxAge:   int(csrfCookieAge.Seconds()),
		CookieHTTPOnly: true,
		CookieSecure:   tls,
		CookieSameSite: http.SameSiteLaxMode,
		// API keys are not sent by browsers on their own, so requests that
		// carry one cannot be forged cross-site.
		Skipper: func(c echo.Context) bool {
			_, sent := bearerToken(c)
			return sent && handlers.IsAPI(c)
		},
		ErrorHandler: func(err error, c echo.Context) error {
			return echo.NewHTTPError(http.StatusForbidden, "missing or invalid csrf token").SetInternal(err)
		},
	})
}

// rotateCSRF gives the browser a new CSRF token, in place of the one the
// middleware set on this response, and to the page this response renders.
// Sessions call it when a session starts: a token read or planted while
// signed out is worth nothing once signed in.
func rotateCSRF(tls bool) func(echo.Context) {
	return func(c echo.Context) {
		b := make([]byte, 32)
		_, _ = rand.Read(b) // crypto/rand does not fail
		token := base64.RawURLEncoding.EncodeToString(b)
		h := c.Response().Header()
		var kept []string
		for _, line := range h.Values("Set-Cookie") {
			if !strings.HasPrefix(line, csrfCookie+"=") {
				kept = append(kept, line)
			}
		}
		h.Del("Set-Cookie")
		for _, line := range kept {
			h.Add("Set-Cookie", line)
		}
		c.SetCookie(&http.Cookie{Name: csrfCookie, Value: token, Path: "/", Expires: time.Now().Add(csrfCookieAge),
			HttpOnly: true, Secure: tls, SameSite: http.SameSiteLaxMode})
		c.Set(middleware.DefaultCSRFConfig.ContextKey, token)
	}
}
