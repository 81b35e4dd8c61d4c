// Package handlers holds Curate's HTTP handlers, one file per area, pages
// (templ) and the JSON API (/api/...) side by side. A handler parses,
// authorizes, calls one domain service, and renders: it holds no database
// handle and starts no job itself (services own their transactions, audit
// records and jobs).
package handlers

import (
	"context"
	"log/slog"
	"net/url"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/bestofn"
	"github.com/curate/curate/internal/codebook"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/feedbackstats"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/health"
	"github.com/curate/curate/internal/hygiene"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/livescore"
	"github.com/curate/curate/internal/loops"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/monitors"
	"github.com/curate/curate/internal/overview"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/ratelimit"
	"github.com/curate/curate/internal/review"
	"github.com/curate/curate/internal/reward"
	"github.com/curate/curate/internal/routing"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/views"
)

// Handlers holds the dependencies every handler may use.
type Handlers struct {
	Accounts *accounts.Service
	Sessions *Sessions
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
	// Models is the model registry; Serving its serving targets.
	Models  *models.Service
	Eval    *eval.Service
	Serving *serving.Service
	// Reward keeps the reward formulas evaluations combine scores with.
	Reward *reward.Service
	// Endpoints are the registered chat endpoints; Judge grades answers.
	Endpoints *endpoints.Service
	Judge     *judge.Service
	// BestOfN selects the best of several answers.
	BestOfN *bestofn.Service
	// Experiments runs A/B experiments between model versions.
	Experiments *experiments.Service
	// Codebooks keeps the rules assistants retrieve.
	Codebooks *codebook.Service
	// Alerts lists, dismisses and configures alerts.
	Alerts *alerts.Service
	// FeedbackStats sums up feedback for the stats page.
	FeedbackStats *feedbackstats.Service
	// AuditLog reads the audit log.
	AuditLog *audit.Service
	// Health answers the readiness probe.
	Health *health.Service
	// Overview counts the start page's waiting work.
	Overview *overview.Service
	// Loops run the loop by themselves; Routing hands new items to
	// curators; Hygiene records whether an item may be training data.
	Loops   *loops.Service
	Routing *routing.Service
	Hygiene *hygiene.Service
	// CanOpen reports whether a role may GET a local link, by the routes
	// table the server enforces; pages show only the links it allows.
	CanOpen func(role auth.Role, href string) bool
	// Review is overlapping review: plans, each reviewer's label,
	// adjudication and agreement.
	Review *review.Service
	// LiveScore keeps the live scorers of experiments and aliases.
	LiveScore *livescore.Service
	// Monitors reads the production monitors of served versions.
	Monitors *monitors.Service
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
