package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/views"
)

// Evaluations is the evaluation page: the golden sets.
func (h *Handlers) Evaluations(c echo.Context) error {
	return h.renderEvaluations(c, http.StatusOK, views.GoldenSetForm{SplitTags: "gold_set, red_team"}, nil)
}

func (h *Handlers) renderEvaluations(c echo.Context, status int, form views.GoldenSetForm, problems map[string]string) error {
	caller := CallerOf(c)
	m := views.EvaluationsView{IsAdmin: caller.Role.AtLeast(auth.Admin), Form: form, Errors: problems}
	sets, err := h.Eval.GoldenSets(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	for _, g := range sets {
		m.GoldenSets = append(m.GoldenSets, views.GoldenSetRow{VersionID: g.VersionID.String(), Name: g.Name,
			Dataset: g.DatasetName + " v" + strconv.Itoa(g.VersionNumber), DatasetURL: "/datasets/" + g.DatasetID.String(), Kind: g.Kind,
			SplitTags: strings.Join(g.SplitTags, ", "), CreatedBy: g.CreatedBy, CreatedAt: views.When(g.CreatedAt), Items: g.Items})
	}
	if m.IsAdmin {
		frozen, err := h.Eval.Frozen(ctx(c), caller.OrgID)
		if err != nil {
			return err
		}
		for _, f := range frozen {
			m.Frozen = append(m.Frozen, views.Option{Value: f.ID.String(), Label: f.Label})
		}
	}
	return render(c, status, views.EvaluationsPage(h.page(c, "Evaluation", "eval"), m))
}

// GoldenSetMark makes a frozen version a golden set.
func (h *Handlers) GoldenSetMark(c echo.Context) error {
	form := views.GoldenSetForm{VersionID: c.FormValue("version_id"), Name: c.FormValue("name"), SplitTags: c.FormValue("split_tags")}
	var tags []string
	for _, t := range strings.Split(form.SplitTags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	id, err := uuid.Parse(form.VersionID)
	if err != nil {
		return h.renderEvaluations(c, http.StatusUnprocessableEntity, form, map[string]string{"version_id": "choose a frozen dataset version"})
	}
	g, err := h.Eval.Mark(ctx(c), actor(c), CallerOf(c).OrgID, id, form.Name, tags)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		fields := map[string]string{}
		for f, msg := range invalid.ByField() {
			if strings.HasPrefix(f, "split_tags[") {
				f = "split_tags"
			}
			fields[f] = msg
		}
		return h.renderEvaluations(c, http.StatusUnprocessableEntity, form, fields)
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", g.Name+" is a golden set: "+views.Count(g.Items, "item", "items")+".")
	return redirect(c, "/evaluations")
}

// GoldenSetUnmark stops using a version as a golden set.
func (h *Handlers) GoldenSetUnmark(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := h.Eval.Unmark(ctx(c), actor(c), CallerOf(c).OrgID, id); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The version is no longer a golden set.")
	return redirect(c, "/evaluations")
}
