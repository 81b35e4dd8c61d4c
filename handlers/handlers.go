// Package handlers holds Curate's HTTP handlers, one file per area, pages
// (templ) and the JSON API (/api/...) side by side. A handler parses,
// authorizes, calls one domain service, and renders: it holds no database
// handle and starts no job itself (services own their transactions, audit
// records and jobs).
package handlers

import (
	"context"
	"net/url"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/ratelimit"
	"github.com/curate/curate/views"
)

// Handlers holds the dependencies every handler may use: the process's
// domain services, built once by app.New (a handler calls one of them, and
// nothing below them), and what belongs to the web alone.
type Handlers struct {
	*app.Services
	Sessions *Sessions
	// UserLimiter bounds feedback per end user (the item's user_id).
	UserLimiter *ratelimit.Limiter
	// CanOpen reports whether a role may GET a local link, by the routes
	// table the server enforces; pages show only the links it allows.
	CanOpen func(role auth.Role, href string) bool
}

// Caller is who is making the request, set by the authentication middleware.
type Caller struct {
	Kind    string // "session" or "api_key"
	OrgID   uuid.UUID
	OrgSlug string
	OrgName string
	Role    auth.Role
	UserID  uuid.UUID // session callers
	KeyID   uuid.UUID // API key callers
	Label   string    // the user's e-mail or the key's name
}

const callerKey = "curate.caller"

// SetCaller records the authenticated caller on the request.
func SetCaller(c echo.Context, caller *Caller) { c.Set(callerKey, caller) }

// CallerOf returns the request's caller, or nil when not signed in.
func CallerOf(c echo.Context) *Caller {
	caller, _ := c.Get(callerKey).(*Caller)
	return caller
}

// Actor is the caller as the audit log names it.
func (c *Caller) Actor(ip string) audit.Actor {
	if c.Kind == "api_key" {
		return audit.Actor{Kind: "api_key", ID: c.KeyID, Label: c.Label, IP: ip}
	}
	return audit.Actor{Kind: "user", ID: c.UserID, Label: c.Label, IP: ip}
}

func actor(c echo.Context) audit.Actor { return CallerOf(c).Actor(c.RealIP()) }

func ctx(c echo.Context) context.Context { return c.Request().Context() }

// page builds the layout's model for the current request. The third
// argument, the section a page once named for the navigation to
// highlight, is not read: the navigation highlights by the page's path.
func (h *Handlers) page(c echo.Context, title, _ string) views.Page {
	p := views.Page{Title: title, Path: c.Request().URL.Path, CSRF: CSRFToken(c)}
	if caller := CallerOf(c); caller != nil && caller.Kind == "session" {
		p.User = &views.User{Email: caller.Label, Role: string(caller.Role), Org: caller.OrgName}
		p.Alerts = h.alertBanners(c, caller.OrgID)
		if h.CanOpen != nil {
			role := caller.Role
			p.Allowed = func(href string) bool { return h.CanOpen(role, href) }
		}
	}
	p.Flashes = h.Sessions.TakeFlashes(c)
	return p
}

// CSRFToken is the request's CSRF token, set by the CSRF middleware.
func CSRFToken(c echo.Context) string {
	t, _ := c.Get("csrf").(string)
	return t
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
