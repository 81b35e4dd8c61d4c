package web

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
)

// linkRoles answers whether a role may open a local link: it finds the
// link's route with e's own router and reads the least role the routes
// table gives it, so a page never shows a link that requireRole would
// refuse. A link that is not a page (no GET route, another host, a
// relative path) is not allowed.
func linkRoles(e *echo.Echo, routes []Route) func(auth.Role, string) bool {
	least := map[string]auth.Role{}
	for _, r := range routes {
		if r.Method == http.MethodGet {
			least[r.Path] = r.Role
		}
	}
	return func(role auth.Role, href string) bool {
		u, err := url.Parse(href)
		if err != nil || u.Scheme != "" || u.Host != "" || len(u.Path) == 0 || u.Path[0] != '/' {
			return false
		}
		c := e.NewContext(nil, nil)
		e.Router().Find(http.MethodGet, u.Path, c)
		min, ok := least[c.Path()]
		if !ok {
			return false
		}
		return min == Public || role.AtLeast(min)
	}
}
