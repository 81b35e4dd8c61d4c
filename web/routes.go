package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/handlers"
	"github.com/curate/curate/internal/auth"
)

// Route is one entry of the application's surface: who may call what.
type Route struct {
	Method  string
	Path    string
	Role    auth.Role // the least role allowed; Public for everyone
	Handler echo.HandlerFunc
}

// Public marks routes that need no sign-in.
const Public auth.Role = ""

// Routes is every route of Curate with the least role it needs. Reading it
// tells the whole surface of the application.
func Routes(h *handlers.Handlers) []Route {
	const (
		GET   = http.MethodGet
		POST  = http.MethodPost
		PATCH = http.MethodPatch
	)
	return []Route{
		// Operations.
		{GET, "/healthz", Public, h.Healthz},
		{GET, "/readyz", Public, h.Readyz},

		// Signing in and out.
		{GET, "/login", Public, h.LoginForm},
		{POST, "/login", Public, h.Login},
		{POST, "/logout", auth.Viewer, h.Logout},

		// The Curate tab.
		{GET, "/", auth.Viewer, h.Home},

		// Administration.
		{GET, "/admin/users", auth.Admin, h.Users},
		{POST, "/admin/users", auth.Admin, h.UserCreate},
		{POST, "/admin/users/:id/role", auth.Admin, h.UserRole},
		{POST, "/admin/users/:id/active", auth.Admin, h.UserActive},
		{GET, "/admin/api-keys", auth.Admin, h.APIKeys},
		{POST, "/admin/api-keys", auth.Admin, h.APIKeyCreate},
		{POST, "/admin/api-keys/:id/revoke", auth.Admin, h.APIKeyRevoke},
		{GET, "/admin/audit", auth.Admin, h.Audit},

		// JSON API: API keys or a session.
		{GET, "/api/me", auth.Viewer, h.APIMe},

		// Feedback API.
		{POST, "/api/feedback", auth.Curator, h.APIFeedbackCreate},
		{POST, "/api/feedback/batch", auth.Curator, h.APIFeedbackBatch},
		{GET, "/api/feedback", auth.Viewer, h.APIFeedbackList},
		{GET, "/api/feedback/:id", auth.Viewer, h.APIFeedbackGet},
		{PATCH, "/api/feedback/:id", auth.Curator, h.APIFeedbackPatch},
	}
}
