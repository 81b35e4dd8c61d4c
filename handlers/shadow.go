package handlers

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/shadow"
	"github.com/curate/curate/views"
)

// APIShadowCreate shadows the version the path names under an alias of
// its model: {"alias": "production", "target": "gpu-1", "sample": 0.1,
// "scorers": [...], "judge": {...}, "reward_formula": {...}, "until":
// "2026-12-31T00:00:00Z"}.
func (h *Handlers) APIShadowCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var in shadow.Request
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	out, err := h.Shadows.Create(ctx(c), actor(c), CallerOf(c).OrgID, id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

// APIShadowList lists the organisation's shadows, newest first; of one
// candidate with ?candidate_version_id=.
func (h *Handlers) APIShadowList(c echo.Context) error {
	q, err := queryParams(c, "candidate_version_id")
	if err != nil {
		return err
	}
	var cand *uuid.UUID
	if raw := q.Get("candidate_version_id"); raw != "" {
		id, err := uuid.Parse(raw)
		if err != nil {
			return errs.InvalidField("candidate_version_id", "must be a model version's id")
		}
		cand = &id
	}
	list, err := h.Shadows.List(ctx(c), CallerOf(c).OrgID, cand)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[shadow.Shadow]{Data: list})
}

// APIShadowGet answers a shadow with its paired comparison (production's
// answers as a, the candidate's as b), items filtered by ?filter=.
func (h *Handlers) APIShadowGet(c echo.Context) error {
	q, err := queryParams(c, "filter")
	if err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	filter := q.Get("filter")
	if filter != "" && !slices.Contains(eval.Filters, filter) {
		return errs.InvalidField("filter", "must be one of %v", eval.Filters)
	}
	d, err := h.Shadows.Detail(ctx(c), CallerOf(c).OrgID, id, filter)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// APIShadowStop stops a running shadow: {"reason": "..."} may say why.
func (h *Handlers) APIShadowStop(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var in struct {
		Reason string `json:"reason"`
	}
	if err := decodeOptionalJSON(c, &in); err != nil {
		return err
	}
	out, err := h.Shadows.Stop(ctx(c), actor(c), CallerOf(c).OrgID, id, in.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// ShadowList is the list of the organisation's shadows.
func (h *Handlers) ShadowList(c echo.Context) error {
	list, err := h.Shadows.List(ctx(c), CallerOf(c).OrgID, nil)
	if err != nil {
		return err
	}
	m := views.ShadowsView{}
	for _, s := range list {
		m.Rows = append(m.Rows, shadowRow(s))
	}
	return render(c, http.StatusOK, views.ShadowsPage(h.page(c, "Shadow deployments", "models"), m))
}

func shadowRow(s shadow.Shadow) views.ShadowRow {
	return views.ShadowRow{ID: s.ID.String(), URL: "/shadows/" + s.ID.String(), Candidate: s.Model + " " + s.CandidateVersion,
		CandidateURL: "/models/versions/" + s.CandidateVersionID.String(), Model: s.Model, Alias: s.Alias, Target: s.Target,
		Sample: percent(s.Sample), Status: s.Status, StoppedReason: s.StoppedReason, Scored: int(s.Scored), Open: int(s.Open),
		Skipped: int(s.Skipped), Fail: int(s.Failed), Cost: pricing.Micros(int64(s.JudgeCostUSD * 1e6)).String(), Created: views.When(s.CreatedAt)}
}

// ShadowDetail is a shadow's page: what it mirrors and how, and the
// paired comparison of production's answers with the candidate's, as the
// compare view sets two versions side by side.
func (h *Handlers) ShadowDetail(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	filter := q.Get("filter")
	if !slices.Contains(eval.Filters, filter) {
		filter = ""
	}
	caller := CallerOf(c)
	d, err := h.Shadows.Detail(ctx(c), caller.OrgID, id, filter)
	if err != nil {
		return err
	}
	m := views.ShadowView{ShadowRow: shadowRow(d.Shadow), IsAdmin: caller.Role.AtLeast(auth.Admin), Formula: d.Formula, By: d.CreatedBy,
		Until: views.WhenPtr(d.Until), ALabel: d.Model + " under " + d.Alias, BLabel: d.Model + " " + d.CandidateVersion}
	if d.Until == nil {
		m.Until = ""
	}
	for _, name := range d.Scorers {
		m.Scorers = append(m.Scorers, scorers.Describe(name).Label)
	}
	if d.Comparison.Total > 0 {
		link := func(filter string) string {
			if filter == "" {
				return "/shadows/" + id.String()
			}
			return "/shadows/" + id.String() + "?" + url.Values{"filter": {filter}}.Encode()
		}
		e := compareEvaluationView(d.Comparison, filter, link)
		e.Hint = "A is the answer the alias served, as its feedback recorded it; B is the candidate's answer to the same query, asked in the background. Both are scored alike."
		e.ARunURL, e.BRunURL = "/models", m.CandidateURL
		e.AItems, e.BItems = d.Comparison.A.Items, d.Comparison.B.Items
		m.Evaluation = e
	}
	return render(c, http.StatusOK, views.ShadowPage(h.page(c, "Shadow of "+m.Candidate, "models"), m))
}

// ShadowStop stops a running shadow from its page.
func (h *Handlers) ShadowStop(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	s, err := h.Shadows.Stop(ctx(c), actor(c), CallerOf(c).OrgID, id, "")
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The shadow of "+s.Model+" "+s.CandidateVersion+" has stopped: it mirrors no more queries, and those it sampled are still scored.")
	return redirect(c, "/shadows/"+id.String())
}

// versionShadow is what a version's page says of its newest shadow with
// scored queries; nil when it has none.
func (h *Handlers) versionShadow(c echo.Context, versionID uuid.UUID) (*views.VersionShadowView, error) {
	if h.Shadows == nil {
		return nil, nil
	}
	ev, ok, err := h.Shadows.Evidence(ctx(c), CallerOf(c).OrgID, versionID)
	if err != nil || !ok {
		return nil, err
	}
	d := ev.Difference
	out := &views.VersionShadowView{URL: "/shadows/" + ev.ShadowID.String(), Alias: ev.Alias, Queries: d.N, Difference: signed(d.Mean)}
	if len(d.CI) == 2 {
		out.Interval = "95% interval " + interval(d.CI)
		switch {
		case d.CI[0] > 0:
			out.Sign = "up"
		case d.CI[1] < 0:
			out.Sign = "down"
		}
	}
	return out, nil
}
