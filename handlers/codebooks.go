package handlers

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/codebook"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/views"
)

// CodebookList lists the codebooks.
func (h *Handlers) CodebookList(c echo.Context) error {
	rows, err := h.Codebooks.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	var m views.CodebooksView
	for _, r := range rows {
		m.Rows = append(m.Rows, views.CodebookRow{Name: r.Name, Rules: int(r.Rules), Published: int(r.Published)})
	}
	return render(c, http.StatusOK, views.CodebooksPage(h.page(c, "Codebooks", "pairs"), m))
}

// Codebook is one codebook's page. ?from=<feedback id> fills the new-rule
// form from a corrected item (a codebook not made yet shows empty).
func (h *Handlers) Codebook(c echo.Context) error {
	form := views.CodebookRuleForm{Status: "active", SourceID: c.QueryParam("from")}
	return h.renderCodebook(c, http.StatusOK, form, nil)
}

func (h *Handlers) renderCodebook(c echo.Context, status int, form views.CodebookRuleForm, problems map[string]string) error {
	caller := CallerOf(c)
	name := c.Param("name")
	m := views.CodebookView{Name: name, Status: c.QueryParam("status"), Q: c.QueryParam("q"), CanEdit: caller.Role.AtLeast(auth.Curator),
		Form: form, Errors: problems}
	rules, err := h.Codebooks.Rules(ctx(c), caller.OrgID, name, m.Status, m.Q)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		if form.SourceID == "" {
			return err
		}
	case err != nil:
		return err
	}
	for _, r := range rules {
		m.Rules = append(m.Rules, views.CodebookRuleRow{ID: r.ID.String(), Section: r.Section, Content: r.Content, Status: r.Status,
			Helpful: r.Helpful, Harmful: r.Harmful, Neutral: r.Neutral, Flagged: r.Flagged})
	}
	if err == nil {
		versions, err := h.Codebooks.Versions(ctx(c), caller.OrgID, name)
		if err != nil {
			return err
		}
		for _, v := range versions {
			m.Versions = append(m.Versions, views.CodebookVersionRow{Version: int(v.Version), Hash: v.ContentHash[:12], PublishedBy: v.PublishedByLabel,
				Created: views.When(v.CreatedAt)})
		}
	}
	if id, perr := uuid.Parse(form.SourceID); perr == nil {
		item, err := h.Feedback.Get(ctx(c), caller.OrgID, id)
		if err != nil {
			return err
		}
		f := item.Feedback
		m.Source = &views.RuleSource{ID: id.String(), Query: f.Query, Response: f.Response, Correction: f.Correction}
	}
	return render(c, status, views.CodebookPage(h.page(c, "Codebook "+name, "pairs"), m))
}

// CodebookRuleAdd adds a rule from the page's form.
func (h *Handlers) CodebookRuleAdd(c echo.Context) error {
	form := views.CodebookRuleForm{Section: c.FormValue("section"), Content: c.FormValue("content"), Status: c.FormValue("status"),
		SourceID: c.FormValue("source_feedback_id")}
	in := codebook.NewRule{Section: form.Section, Content: form.Content, Status: form.Status}
	if id, err := uuid.Parse(form.SourceID); err == nil {
		in.SourceFeedbackIDs = []uuid.UUID{id}
	}
	_, err := h.Codebooks.AddRule(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("name"), in)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderCodebook(c, http.StatusUnprocessableEntity, form, invalid.ByField())
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The rule is added. Publish the codebook for the assistant to use it.")
	return redirect(c, "/codebooks/"+c.Param("name"))
}

// CodebookPublish publishes the codebook's active rules.
func (h *Handlers) CodebookPublish(c echo.Context) error {
	p, created, err := h.Codebooks.Publish(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("name"))
	if err != nil {
		return err
	}
	msg := "Nothing changed since the last version."
	if created {
		msg = "Version " + strconv.Itoa(p.Version) + " is published."
	}
	h.Sessions.Flash(c, "ok", msg)
	return redirect(c, "/codebooks/"+c.Param("name"))
}
