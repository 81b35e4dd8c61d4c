package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/views"
)

const auditPageSize = 50

// Audit shows the audit log, newest first, filtered by actor and action,
// one keyset page at a time.
func (h *Handlers) Audit(c echo.Context) error {
	caller := CallerOf(c)
	actorFilter := trimMax(c.QueryParam("actor"), 254)
	action := trimMax(c.QueryParam("action"), 100)
	before, _ := strconv.ParseInt(c.QueryParam("before"), 10, 64)
	rows, err := h.Q.AuditList(ctx(c), db.AuditListParams{OrgID: nullUUID(caller.OrgID), Actor: actorFilter, Action: action, BeforeID: before, RowLimit: auditPageSize + 1})
	if err != nil {
		return err
	}
	actions, err := h.Q.AuditActions(ctx(c), nullUUID(caller.OrgID))
	if err != nil {
		return err
	}
	v := views.AuditView{Actor: actorFilter, Action: action, Actions: actions}
	if len(rows) > auditPageSize {
		rows = rows[:auditPageSize]
		q := url.Values{"actor": {actorFilter}, "action": {action}, "before": {strconv.FormatInt(rows[len(rows)-1].ID, 10)}}
		v.NextPage = "/admin/audit?" + q.Encode()
	}
	for _, r := range rows {
		target := r.TargetType
		if r.TargetID != "" {
			target = fmt.Sprintf("%s %s", r.TargetType, r.TargetID)
		}
		details := string(r.Details)
		if details == "{}" {
			details = ""
		}
		v.Rows = append(v.Rows, views.AuditRow{When: views.When(r.CreatedAt), Actor: r.ActorLabel, Action: r.Action, Target: target, Details: details, IP: r.Ip})
	}
	return render(c, http.StatusOK, views.AuditPage(h.page(c, "Audit log", "audit"), v))
}
