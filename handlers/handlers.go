// Package handlers holds Curate's HTTP handlers, one file per area, pages
// (templ) and the JSON API (/api/...) side by side. A handler parses,
// authorizes, calls one domain function or query, and renders.
package handlers

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"sync"

	"github.com/a-h/templ"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/feedbackstats"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/health"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/ratelimit"
	"github.com/curate/curate/views"
)

// Handlers holds the dependencies every handler may use.
type Handlers struct {
	Pool     *pgxpool.Pool
	Q        *db.Queries
	Accounts *accounts.Service
	Sessions *Sessions
	River    *river.Client[pgx.Tx]
	Log      *slog.Logger
	Feedback *feedback.Service
	Pairs    *pairs.Service
	// UserLimiter bounds feedback per end user (the item's user_id).
	UserLimiter *ratelimit.Limiter
	// Importer runs imports (feedback and pair files, through import runs)
	// and the Langfuse connection.
	Importer *imports.Service
	// Datasets curates training datasets and their exports.
	Datasets *datasets.Service
	// FineTune launches fine-tuning jobs and reports on them.
	FineTune *finetune.Service
	// Alerts lists, dismisses and configures alerts.
	Alerts *alerts.Service
	// FeedbackStats sums up feedback for the stats page.
	FeedbackStats *feedbackstats.Service
	// AuditLog reads the audit log.
	AuditLog *audit.Service
	// Health answers the readiness probe.
	Health *health.Service
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

// pageBuffers holds the buffers pages render into.
var pageBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// render writes a templ component with a status code. The page is rendered
// into a buffer first: it goes out in one write with its length, and a
// rendering error becomes a clean error page instead of half a page.
func render(c echo.Context, status int, cmp templ.Component) error {
	buf := pageBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer pageBuffers.Put(buf)
	if err := cmp.Render(ctx(c), buf); err != nil {
		return err
	}
	return c.Blob(status, echo.MIMETextHTMLCharsetUTF8, buf.Bytes())
}

// page builds the layout's model for the current request.
func (h *Handlers) page(c echo.Context, title, section string) views.Page {
	p := views.Page{Title: title, Section: section, CSRF: CSRFToken(c)}
	if caller := CallerOf(c); caller != nil && caller.Kind == "session" {
		p.User = &views.User{Email: caller.Label, Role: string(caller.Role), Org: caller.OrgName}
		p.Alerts = h.alertBanners(c, caller.OrgID)
	}
	p.Flashes = h.Sessions.TakeFlashes(c)
	return p
}

// CSRFToken is the request's CSRF token, set by the CSRF middleware.
func CSRFToken(c echo.Context) string {
	t, _ := c.Get("csrf").(string)
	return t
}

// redirect answers a form post: a 303 so the browser follows with a GET.
func redirect(c echo.Context, to string) error {
	if c.Request().Header.Get("HX-Request") == "true" {
		c.Response().Header().Set("HX-Redirect", to)
		return c.NoContent(http.StatusNoContent)
	}
	return c.Redirect(http.StatusSeeOther, to)
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
