package handlers

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/views"
)

// Home is the Curate tab's start page: the work waiting for the user and
// for the organisation, each count a link to the list that holds it.
func (h *Handlers) Home(c echo.Context) error {
	caller := CallerOf(c)
	sum, err := h.Overview.Summarize(ctx(c), caller.OrgID, caller.UserID)
	if err != nil {
		return err
	}
	v := views.HomeView{OrgName: caller.OrgName, ReadyDatasets: sum.ReadyDatasets, ActiveJobs: sum.ActiveJobs, OpenAlerts: sum.OpenAlerts,
		MineWaiting: sum.MineWaiting, MineAll: sum.MineAll,
		MineURL: feedbackQueueURL(url.Values{"assignee": {caller.UserID.String()}})}
	for _, s := range feedback.Statuses {
		v.QueueTotal += sum.ByStatus[s]
		v.Queue = append(v.Queue, views.HomeStatus{Status: s, Count: sum.ByStatus[s], URL: feedbackQueueURL(url.Values{"status": {s}})})
	}
	return render(c, http.StatusOK, views.HomePage(h.page(c, "Overview", "home"), v))
}
