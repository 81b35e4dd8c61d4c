package handlers

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
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
	for _, a := range sum.Aliases {
		v.Aliases = append(v.Aliases, views.HomeAlias{Model: a.ModelName, Alias: a.Alias, Version: a.Version,
			URL: "/models/versions/" + a.VersionID.String(), Since: views.When(a.UpdatedAt)})
	}
	for _, d := range sum.Deployments {
		v.Deployments = append(v.Deployments, views.HomeDeployment{Model: d.ModelName, Version: d.Version, Alias: d.Alias, Target: d.TargetName,
			Action: d.Action, Status: string(d.Status), URL: "/models/versions/" + d.VersionID.String(), Since: views.When(d.CreatedAt)})
	}
	for _, e := range sum.Experiments {
		he := views.HomeExperiment{Name: e.Name, URL: "/experiments/" + url.PathEscape(e.Key), Status: string(e.Status), Action: e.Action, Reason: e.Reason}
		if e.Action == "" && e.StopReason != "" {
			he.Reason = "Paused: " + e.StopReason
		}
		v.Experiments = append(v.Experiments, he)
	}
	for _, r := range sum.Evaluations {
		problem := r.Error
		if r.Status == db.EvaluationStatusPaused {
			problem = r.PausedReason
		}
		v.Evaluations = append(v.Evaluations, views.HomeEvaluation{Candidate: r.CandidateLabel, GoldenSet: r.GoldenSetName,
			URL: "/evaluations/runs/" + r.ID.String(), Status: string(r.Status), Done: int(r.Done), Total: int(r.Total), Problem: problem})
	}
	return render(c, http.StatusOK, views.HomePage(h.page(c, "Overview", "home"), v))
}
