package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/views"
)

// AgreementList is the judge-versus-people page: past runs and the form to
// start one, its filter taken from ?filter= (the queue links here with its
// own).
func (h *Handlers) AgreementList(c echo.Context) error {
	form := views.AgreementForm{Filter: c.QueryParam("filter"), Threshold: ftoa(judge.DefaultThreshold), Items: strconv.Itoa(judge.DefaultItems)}
	return h.renderAgreements(c, http.StatusOK, form, nil)
}

func (h *Handlers) renderAgreements(c echo.Context, status int, form views.AgreementForm, problems map[string]string) error {
	caller := CallerOf(c)
	m := views.AgreementListView{IsAdmin: caller.Role.AtLeast(auth.Admin), Form: form, Errors: problems}
	runs, err := h.Judge.Agreements(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	for _, r := range runs {
		m.Runs = append(m.Runs, views.AgreementRow{ID: r.ID.String(), Started: views.When(r.CreatedAt), Judge: judgeName(r),
			Status: string(r.Status), Spearman: optional(r.Spearman.Float64, r.Spearman.Valid), Kappa: optional(r.Kappa.Float64, r.Kappa.Valid),
			Done: int(r.Done), Total: int(r.Total), Conflicts: int(r.Conflicts)})
	}
	if m.IsAdmin {
		judges, templates, err := h.Judge.Choices(ctx(c), caller.OrgID)
		if err != nil {
			return err
		}
		for _, e := range judges {
			m.Endpoints = append(m.Endpoints, views.Option{Value: e.Name, Label: e.Name + " (" + e.Model + ")"})
		}
		for _, t := range templates {
			m.Templates = append(m.Templates, views.Option{Value: t.Name, Label: fmt.Sprintf("%s, version %d", t.Name, t.Version)})
		}
	}
	return render(c, status, views.AgreementListPage(h.page(c, "Judge versus people", "models"), m))
}

func judgeName(r db.JudgeAgreement) string {
	return fmt.Sprintf("%s · %s v%d", r.Endpoint, r.Template, r.TemplateVersion)
}

// optional writes a statistic to three decimals, or "Not enough data".
func optional(x float64, ok bool) string {
	if !ok {
		return "Not enough data"
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

// AgreementStart starts a run of the judge over rated feedback.
func (h *Handlers) AgreementStart(c echo.Context) error {
	form := views.AgreementForm{Endpoint: c.FormValue("endpoint"), Template: c.FormValue("template"), Filter: c.FormValue("filter"),
		Threshold: c.FormValue("threshold"), Items: c.FormValue("items")}
	bad := map[string]string{}
	r := judge.AgreementRequest{Endpoint: form.Endpoint, Template: form.Template}
	var err error
	if r.Threshold, err = strconv.ParseFloat(form.Threshold, 64); err != nil {
		bad["threshold"] = "must be a number above 0 and at most 1"
	}
	if r.Items, err = strconv.Atoi(form.Items); err != nil {
		bad["items"] = "must be a whole number"
	}
	values, err := url.ParseQuery(form.Filter)
	if err == nil {
		r.Filter, err = feedback.ParseFilter(values)
	}
	if err != nil {
		bad["filter"] = "is not a filter of the queue: " + filterProblem(err)
	}
	if len(bad) == 0 {
		run, err := h.Judge.StartAgreement(ctx(c), actor(c), CallerOf(c).OrgID, r)
		var invalid *errs.Invalid
		switch {
		case errors.As(err, &invalid):
			bad = invalid.ByField()
		case err != nil:
			return err
		default:
			return redirect(c, "/evaluations/agreement/"+run.ID.String())
		}
	}
	return h.renderAgreements(c, http.StatusUnprocessableEntity, form, bad)
}

// filterProblem words a filter's refusal.
func filterProblem(err error) string {
	var invalid *errs.Invalid
	if errors.As(err, &invalid) && len(invalid.Errors) > 0 {
		return invalid.Errors[0].Field + " " + invalid.Errors[0].Message
	}
	return "it cannot be read"
}

// Agreement is one run's report.
func (h *Handlers) Agreement(c echo.Context) error {
	m, err := h.agreementView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.AgreementPage(h.page(c, "Judge versus people", "models"), m))
}

// AgreementLive is the report's polled fragment.
func (h *Handlers) AgreementLive(c echo.Context) error {
	m, err := h.agreementView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.AgreementLive(m))
}

func (h *Handlers) agreementView(c echo.Context) (views.AgreementView, error) {
	id, err := pathID(c)
	if err != nil {
		return views.AgreementView{}, err
	}
	a, err := h.Judge.GetAgreement(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return views.AgreementView{}, err
	}
	stalled, err := h.Judge.AgreementStalled(ctx(c), a.JudgeAgreement)
	if err != nil {
		return views.AgreementView{}, err
	}
	filter := "All rated feedback"
	if a.Filter != "" {
		filter = "Rated feedback matching " + a.Filter
	}
	m := views.AgreementView{ID: a.ID.String(), Status: string(a.Status), Judge: judgeName(a.JudgeAgreement), FilterText: filter,
		FilterURL: "/feedback?" + a.Filter, Started: views.When(a.CreatedAt), Finished: views.WhenPtr(a.FinishedAt),
		PausedReason: a.PausedReason, Error: a.Error, Spearman: optional(a.Spearman.Float64, a.Spearman.Valid),
		Kappa: optional(a.Kappa.Float64, a.Kappa.Valid), Cost: pricing.Micros(a.JudgeCostMicros).String(), Done: int(a.Done),
		Total: int(a.Total), Invalid: int(a.Invalid), Conflicts: int(a.Conflicts), Calls: int(a.JudgeCalls), Threshold: ftoa(a.Threshold),
		Running:   a.Status == db.EvaluationStatusQueued || a.Status == db.EvaluationStatusRunning,
		CanResume: stalled && CallerOf(c).Role.AtLeast(auth.Admin)}
	if a.CreatedByLabel != "" {
		m.Started += " by " + a.CreatedByLabel
	}
	if t := a.Table; t != nil {
		m.Observed, m.Expected = strconv.FormatFloat(t.Observed, 'f', 3, 64), strconv.FormatFloat(t.Expected, 'f', 3, 64)
		m.Categories, m.Table = t.Categories, t.Table
	}
	return m, nil
}

// Conflicts is the conflict queue, a tab of the feedback queue.
func (h *Handlers) Conflicts(c echo.Context) error {
	return h.renderConflicts(c, http.StatusOK, c.QueryParam("resolved") == "1", views.ConflictsView{})
}

func (h *Handlers) renderConflicts(c echo.Context, status int, resolved bool, m views.ConflictsView) error {
	caller := CallerOf(c)
	m.Resolved, m.CanAct = resolved, caller.Role.AtLeast(auth.Curator)
	rows, err := h.Judge.Conflicts(ctx(c), caller.OrgID, resolved)
	if err != nil {
		return err
	}
	for _, r := range rows {
		row := views.ConflictRow{ID: r.ID.String(), FeedbackID: r.FeedbackID.UUID.String(), Query: r.QueryPreview, Response: r.ResponsePreview,
			Human: humanScore(r), Judge: strconv.FormatFloat(r.JudgeScore, 'f', 2, 64), Critique: r.Critique, Unsafe: r.JudgeSafetyFlag,
			JudgeName: fmt.Sprintf("%s · %s v%d", r.Endpoint, r.Template, r.TemplateVersion), Note: r.Note, ResolvedBy: r.ResolvedByLabel,
			ResolvedAt: views.WhenPtr(r.ResolvedAt), Created: views.When(r.CreatedAt)}
		if r.Resolution.Valid {
			row.Resolution = string(r.Resolution.ConflictResolution)
		}
		if r.TrainingJobID.Valid {
			// A training run's sample: the teacher against the rules.
			row.TrainingJobID, row.FeedbackID = r.TrainingJobID.UUID.String(), ""
			row.Human = "rules " + strconv.FormatFloat(r.HumanScore, 'f', 2, 64)
			row.JudgeName = "the teacher of a training run"
		}
		m.Rows = append(m.Rows, row)
	}
	return render(c, status, views.ConflictsPage(h.page(c, "Judge conflicts", "feedback"), m))
}

// humanScore writes what the person gave: "4 of 5" or a thumb.
func humanScore(r db.JudgeConflictListRow) string {
	if r.Rating.Valid {
		return fmt.Sprintf("%d of 5", r.Rating.Int16)
	}
	return views.Label(string(r.FeedbackType.FeedbackType))
}

// ConflictResolve records an expert's verdict on a conflict.
func (h *Handlers) ConflictResolve(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	note := c.FormValue("note")
	err = h.Judge.Resolve(ctx(c), actor(c), CallerOf(c).OrgID, id, c.FormValue("resolution"), note)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderConflicts(c, http.StatusUnprocessableEntity, false, views.ConflictsView{Errors: invalid.ByField(), TypedID: id.String(), TypedNote: note})
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The conflict is resolved.")
	return redirect(c, "/feedback/conflicts")
}

// AgreementResume carries a paused or stalled run on.
func (h *Handlers) AgreementResume(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := h.Judge.ResumeAgreement(ctx(c), actor(c), CallerOf(c).OrgID, id); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The run goes on from where it stopped.")
	return redirect(c, "/evaluations/agreement/"+id.String())
}
