package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/codebook"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/views"
)

// CodebookList lists the codebooks. With ?from=<feedback id> (the item's
// "Make a rule") each codebook opens with the rule form filled from the
// item, and ?open=<name> goes to one, new or not.
func (h *Handlers) CodebookList(c echo.Context) error {
	from := c.QueryParam("from")
	if _, err := uuid.Parse(from); from != "" && err != nil {
		return errs.InvalidField("from", "is not a feedback item's id")
	}
	m := views.CodebooksView{From: from, Open: c.QueryParam("open")}
	if m.Open != "" {
		if err := codebook.CheckName(m.Open); err == nil {
			return redirect(c, "/codebooks/"+m.Open+"?from="+url.QueryEscape(from)+"#new-rule")
		} else {
			var invalid *errs.Invalid
			errors.As(err, &invalid)
			m.Errors = invalid.ByField()
		}
	}
	rows, err := h.Codebooks.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	for _, r := range rows {
		m.Rows = append(m.Rows, views.CodebookRow{Name: r.Name, Rules: int(r.Rules), Published: int(r.Published)})
	}
	return render(c, http.StatusOK, views.CodebooksPage(h.page(c, "Codebooks", "pairs"), m))
}

// Codebook is one codebook's page. ?from=<feedback id> fills the new-rule
// form from a corrected item (a codebook not made yet shows empty), with
// the reflector's suggestion when one is ready.
func (h *Handlers) Codebook(c echo.Context) error {
	form := views.CodebookRuleForm{Status: "active", SourceID: c.QueryParam("from")}
	return h.renderCodebook(c, http.StatusOK, form, nil, nil)
}

func (h *Handlers) renderCodebook(c echo.Context, status int, form views.CodebookRuleForm, problems map[string]string, like []codebook.Similar) error {
	caller := CallerOf(c)
	name := c.Param("name")
	m := views.CodebookView{Name: name, Status: c.QueryParam("status"), Q: c.QueryParam("q"), Sort: c.QueryParam("sort"),
		CanEdit: caller.Role.AtLeast(auth.Curator), CanPublish: caller.Role.AtLeast(auth.Admin), Form: form, Errors: problems}
	rules, err := h.Codebooks.Rules(ctx(c), caller.OrgID, name, m.Status, m.Q, m.Sort)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		if form.SourceID == "" {
			return err
		}
	case err != nil:
		return err
	}
	exists := err == nil
	for _, r := range rules {
		m.Rules = append(m.Rules, ruleRow(r))
	}
	for _, r := range like {
		m.Similar = append(m.Similar, views.SimilarRule{ID: r.ID.String(), Section: r.Section, Content: r.Content, Percent: int(r.Similarity*100 + 0.5)})
	}
	if exists {
		versions, err := h.Codebooks.Versions(ctx(c), caller.OrgID, name)
		if err != nil {
			return err
		}
		for _, v := range versions {
			m.Versions = append(m.Versions, views.CodebookVersionRow{Version: int(v.Version), Hash: v.ContentHash[:12], PublishedBy: v.PublishedByLabel,
				Created: views.When(v.CreatedAt)})
		}
		b, err := h.Codebooks.Budget(ctx(c), caller.OrgID, name)
		if err != nil {
			return err
		}
		m.Budget = views.CodebookBudget{Budget: b.Budget, Used: b.Used, Active: b.Active, Fit: b.Fit}
		counts, err := h.Codebooks.SuggestionCounts(ctx(c), caller.OrgID, name)
		if err != nil {
			return err
		}
		m.Suggestions = counts["ready"]
	} else {
		m.Budget.Budget = codebook.DefaultBudget
	}
	if id, perr := uuid.Parse(form.SourceID); perr == nil {
		item, err := h.Feedback.Get(ctx(c), caller.OrgID, id)
		if err != nil {
			return err
		}
		f := item.Feedback
		m.Source = &views.RuleSource{ID: id.String(), Query: f.Query, Response: f.Response, Correction: f.Correction}
		if m.Suggest.Endpoints, err = h.Codebooks.Endpoints(ctx(c), caller.OrgID); err != nil {
			return err
		}
		sg, err := h.Codebooks.SuggestionFor(ctx(c), caller.OrgID, name, id)
		if err != nil {
			return err
		}
		if sg != nil {
			m.Suggest.Status, m.Suggest.Reason, m.Suggest.ID, m.Suggest.Endpoint = sg.Status, sg.Reason, sg.ID.String(), sg.Endpoint
			// A fresh form takes the ready suggestion's text to edit.
			if sg.Status == "ready" && m.Form.Content == "" {
				m.Form.Section, m.Form.Content, m.Form.SuggestionID = sg.Section, sg.Content, sg.ID.String()
			}
		}
	}
	return render(c, status, views.CodebookPage(h.page(c, "Codebook "+name, "pairs"), m))
}

func ruleRow(r codebook.Rule) views.CodebookRuleRow {
	return views.CodebookRuleRow{ID: r.ID.String(), Section: r.Section, Content: r.Content, Status: r.Status,
		Helpful: r.Helpful, Harmful: r.Harmful, Neutral: r.Neutral, Flagged: r.Flagged}
}

// CodebookRuleAdd adds a rule from the page's form (or a reviewed
// suggestion). A rule like one already there is shown beside it first:
// the curator merges it into that rule or keeps both.
func (h *Handlers) CodebookRuleAdd(c echo.Context) error {
	caller := CallerOf(c)
	name := c.Param("name")
	form := views.CodebookRuleForm{Section: c.FormValue("section"), Content: c.FormValue("content"), Status: c.FormValue("status"),
		SourceID: c.FormValue("source_feedback_id"), SuggestionID: c.FormValue("suggestion_id")}
	in := codebook.NewRule{Section: form.Section, Content: form.Content, Status: form.Status}
	if id, err := uuid.Parse(form.SourceID); err == nil {
		in.SourceFeedbackIDs = []uuid.UUID{id}
	}
	if id, err := uuid.Parse(form.SuggestionID); err == nil {
		in.SuggestionID = &id
	}
	var err error
	switch into := c.FormValue("merge_into"); {
	case into != "":
		id, perr := uuid.Parse(into)
		if perr != nil {
			return h.renderCodebook(c, http.StatusUnprocessableEntity, form, map[string]string{"merge_into": "name a rule of this codebook"}, nil)
		}
		if _, err = h.Codebooks.MergeInto(ctx(c), actor(c), caller.OrgID, name, id, in); err == nil {
			h.Sessions.Flash(c, "ok", "Merged: the correction is now a source of the existing rule.")
			return redirect(c, "/codebooks/"+name+"/rules/"+id.String())
		}
	case c.FormValue("decision") != "keep":
		like, serr := h.Codebooks.Similar(ctx(c), caller.OrgID, name, in.Content, uuid.Nil)
		if serr != nil {
			return serr
		}
		if len(like) > 0 {
			return h.renderCodebook(c, http.StatusOK, form, nil, like)
		}
		fallthrough
	default:
		_, err = h.Codebooks.AddRule(ctx(c), actor(c), caller.OrgID, name, in)
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderCodebook(c, http.StatusUnprocessableEntity, form, invalid.ByField(), nil)
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The rule is added. Publish the codebook for the assistant to use it.")
	return redirect(c, "/codebooks/"+name)
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

// CodebookBudgetSave sets the codebook's token budget.
func (h *Handlers) CodebookBudgetSave(c echo.Context) error {
	name := c.Param("name")
	budget, perr := strconv.Atoi(c.FormValue("budget_tokens"))
	err := errs.InvalidField("budget_tokens", "must be a whole number of tokens")
	if perr == nil {
		err = h.Codebooks.SetBudget(ctx(c), actor(c), CallerOf(c).OrgID, name, budget)
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderCodebook(c, http.StatusUnprocessableEntity, views.CodebookRuleForm{Status: "active"}, invalid.ByField(), nil)
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The token budget is set.")
	return redirect(c, "/codebooks/"+name)
}

// CodebookRule is a rule's page: its editor, sources and recent uses.
func (h *Handlers) CodebookRule(c echo.Context) error {
	return h.renderRule(c, http.StatusOK, nil, nil, "")
}

func (h *Handlers) renderRule(c echo.Context, status int, form *views.CodebookRuleForm, problems map[string]string, conflict string) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	name := c.Param("name")
	d, err := h.Codebooks.Rule(ctx(c), caller.OrgID, name, id)
	if err != nil {
		return err
	}
	m := views.RuleView{Book: name, Rule: ruleRow(d.Rule), Version: d.Version, CanEdit: caller.Role.AtLeast(auth.Curator),
		Errors: problems, Conflict: conflict, Form: views.CodebookRuleForm{Section: d.Section, Content: d.Content, Status: d.Status}}
	if form != nil {
		m.Form = *form
	}
	for _, s := range d.Sources {
		m.Sources = append(m.Sources, views.RuleSource{ID: s.ID.String(), Query: s.Query, Response: s.Response, Correction: s.Correction})
	}
	for _, u := range d.Uses {
		m.Uses = append(m.Uses, views.RuleUse{FeedbackID: u.ID.String(), Query: u.Query, Outcome: u.Outcome, Type: string(u.FeedbackType),
			When: views.When(u.CreatedAt)})
	}
	return render(c, status, views.CodebookRulePage(h.page(c, "Rule", "pairs"), m))
}

// CodebookRuleSave edits a rule from its page; a rule someone else saved
// first is shown with its new text, the curator's kept in the form.
func (h *Handlers) CodebookRuleSave(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	name := c.Param("name")
	form := views.CodebookRuleForm{Section: c.FormValue("section"), Content: c.FormValue("content"), Status: c.FormValue("status")}
	version, _ := strconv.Atoi(c.FormValue("version"))
	_, err = h.Codebooks.UpdateRule(ctx(c), actor(c), CallerOf(c).OrgID, name, id, version,
		codebook.NewRule{Section: form.Section, Content: form.Content, Status: form.Status})
	var invalid *errs.Invalid
	var conflict *errs.Conflict
	switch {
	case errors.As(err, &invalid):
		return h.renderRule(c, http.StatusUnprocessableEntity, &form, invalid.ByField(), "")
	case errors.As(err, &conflict):
		cur, _ := conflict.Current.(codebook.Rule)
		return h.renderRule(c, http.StatusConflict, &form, nil, cur.Content)
	case err != nil:
		return err
	}
	h.Sessions.Flash(c, "ok", "The rule is saved. Publish the codebook for the assistant to use the change.")
	return redirect(c, "/codebooks/"+name+"/rules/"+id.String())
}

// CodebookVersion shows what a published version changed from the one
// before it.
func (h *Handlers) CodebookVersion(c echo.Context) error {
	version, err := strconv.Atoi(c.Param("version"))
	if err != nil || version < 1 {
		return errs.ErrNotFound
	}
	name := c.Param("name")
	d, err := h.Codebooks.Diff(ctx(c), CallerOf(c).OrgID, name, version)
	if err != nil {
		return err
	}
	m := views.VersionDiffView{Book: name, Version: d.Version, Previous: d.Previous, Kept: d.Kept, Hash: d.ContentHash}
	row := func(r codebook.VersionRule) views.CodebookRuleRow {
		return views.CodebookRuleRow{ID: r.ID.String(), Section: r.Section, Content: r.Content}
	}
	for _, r := range d.Added {
		m.Added = append(m.Added, row(r))
	}
	for _, r := range d.Removed {
		m.Removed = append(m.Removed, row(r))
	}
	for _, ch := range d.Changed {
		m.Changed = append(m.Changed, views.RuleChange{ID: ch.After.ID.String(), BeforeSection: ch.Before.Section, Before: ch.Before.Content,
			AfterSection: ch.After.Section, After: ch.After.Content})
	}
	return render(c, http.StatusOK, views.CodebookVersionPage(h.page(c, "Codebook "+name+" version "+c.Param("version"), "pairs"), m))
}

// CodebookSuggestions is the review queue of suggested rules.
func (h *Handlers) CodebookSuggestions(c echo.Context) error {
	return h.renderSuggestions(c, http.StatusOK, nil)
}

func (h *Handlers) renderSuggestions(c echo.Context, status int, problems map[string]string) error {
	caller := CallerOf(c)
	name := c.Param("name")
	m := views.SuggestionsView{Book: name, Status: c.QueryParam("status"), CanEdit: caller.Role.AtLeast(auth.Curator), Errors: problems,
		Tag: c.FormValue("tag"), From: c.FormValue("from")}
	if m.Status == "" {
		m.Status = "ready"
	}
	rows, counts, err := h.Codebooks.Suggestions(ctx(c), caller.OrgID, name, m.Status)
	if err != nil {
		return err
	}
	m.Counts = counts
	m.Pending = counts["pending"] > 0
	for _, r := range rows {
		row := views.SuggestionRow{ID: r.ID.String(), FeedbackID: r.FeedbackID.String(), Status: r.Status, Section: r.Section, Content: r.Content,
			Reason: r.Reason, Query: r.Query, Response: r.Response, Correction: r.Correction, Cost: pricing.Micros(r.CostMicros).String()}
		if r.Calls == 0 && r.Status != "pending" {
			row.Cost = "nothing (an earlier answer was reused)"
		}
		if r.RuleID != nil {
			row.RuleID = r.RuleID.String()
		}
		m.Rows = append(m.Rows, row)
	}
	if m.Endpoints, err = h.Codebooks.Endpoints(ctx(c), caller.OrgID); err != nil {
		return err
	}
	return render(c, status, views.CodebookSuggestionsPage(h.page(c, "Suggested rules", "pairs"), m))
}

// CodebookSuggest asks the reflector for rules: from one item (the rule
// editor's "Suggest a rule"), or from every corrected item a filter
// matches (the review queue's form).
func (h *Handlers) CodebookSuggest(c echo.Context) error {
	name := c.Param("name")
	r := codebook.SuggestRequest{Endpoint: c.FormValue("endpoint")}
	one := c.FormValue("feedback_id")
	if one != "" {
		id, err := uuid.Parse(one)
		if err != nil {
			return errs.InvalidField("feedback_id", "is not an id")
		}
		r.FeedbackIDs = []uuid.UUID{id}
	} else {
		params := url.Values{}
		for _, k := range []string{"tag", "from"} {
			if v := c.FormValue(k); v != "" {
				params.Set(k, v)
			}
		}
		f, err := feedback.ParseFilter(params)
		var invalid *errs.Invalid
		if errors.As(err, &invalid) {
			return h.renderSuggestions(c, http.StatusUnprocessableEntity, invalid.ByField())
		}
		if err != nil {
			return err
		}
		r.Filter = &f
	}
	n, err := h.Codebooks.Suggest(ctx(c), actor(c), CallerOf(c).OrgID, name, r)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) && one == "" {
		return h.renderSuggestions(c, http.StatusUnprocessableEntity, invalid.ByField())
	}
	if err != nil {
		return err
	}
	if one != "" {
		return redirect(c, "/codebooks/"+name+"?from="+one+"#new-rule")
	}
	h.Sessions.Flash(c, "ok", views.Count(n, "suggestion is", "suggestions are")+" being drafted.")
	return redirect(c, "/codebooks/"+name+"/suggestions?status=pending")
}

// CodebookSuggestionDismiss sets a suggestion aside.
func (h *Handlers) CodebookSuggestionDismiss(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	name := c.Param("name")
	if err := h.Codebooks.Dismiss(ctx(c), actor(c), CallerOf(c).OrgID, name, id); err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The suggestion is dismissed.")
	return redirect(c, "/codebooks/"+name+"/suggestions")
}
