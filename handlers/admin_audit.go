package handlers

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/views"
)

const auditPageSize = 50

// Audit shows the audit log, newest first, filtered by actor and action,
// one keyset page at a time.
func (h *Handlers) Audit(c echo.Context) error {
	caller := CallerOf(c)
	f := audit.Filter{Actor: trimMax(c.QueryParam("actor"), 254), Action: trimMax(c.QueryParam("action"), 100)}
	page, err := h.AuditLog.List(ctx(c), caller.OrgID, f, c.QueryParam("cursor"), auditPageSize)
	if err != nil {
		return err
	}
	actions, err := h.AuditLog.Actions(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	v := views.AuditView{Actor: f.Actor, Action: f.Action, Actions: actions}
	if page.Next != "" {
		q := url.Values{"actor": {f.Actor}, "action": {f.Action}, "cursor": {page.Next}}
		v.NextPage = "/admin/audit?" + q.Encode()
	}
	for _, r := range page.Rows {
		target, href := views.AuditTarget(r.TargetType, r.TargetID)
		v.Rows = append(v.Rows, views.AuditRow{When: views.When(r.CreatedAt), Actor: r.ActorLabel, Action: r.Action,
			Target: target, TargetHref: href, Details: views.AuditDetails(r.Details), IP: r.Ip})
	}
	return render(c, http.StatusOK, views.AuditPage(h.page(c, "Audit log", "audit"), v))
}
