package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/views"
)

// Judges is the judges-and-endpoints page.
func (h *Handlers) Judges(c echo.Context) error {
	return h.renderJudges(c, http.StatusOK, views.JudgesView{Endpoint: views.EndpointForm{Temperature: "0", MaxTokens: "1024", Concurrency: "4"},
		Template: views.TemplateForm{Name: judge.DefaultName}})
}

func (h *Handlers) renderJudges(c echo.Context, status int, m views.JudgesView) error {
	st, err := h.Judge.Settings(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	for _, e := range st.Endpoints {
		m.Endpoints = append(m.Endpoints, views.EndpointRow{Name: e.Name, BaseURL: e.BaseURL, Model: e.Model, HasKey: e.HasAPIKey,
			Prices:   fmt.Sprintf("$%s in, $%s out", ftoa(e.PricePerMillionInput), ftoa(e.PricePerMillionOutput)),
			Settings: fmt.Sprintf("temperature %s, at most %d tokens, %d at once", ftoa(e.Temperature), e.MaxTokens, e.Concurrency)})
	}
	seen := map[string]bool{}
	for _, t := range st.Templates {
		m.Templates = append(m.Templates, views.TemplateRow{Name: t.Name, Version: t.Version, Body: t.Body, CreatedBy: t.CreatedBy,
			CreatedAt: whenOrBuiltIn(t), Newest: !seen[t.Name]})
		seen[t.Name] = true
	}
	if m.Template.Body == "" && len(st.Templates) > 0 {
		m.Template.Body = st.Templates[0].Body
	}
	m.Budget = views.JudgeBudgetView{Spent: st.Budget.Spent.String(), Monthly: st.Budget.Monthly.String(), Calls: st.Budget.Calls,
		Input: strconv.FormatFloat(st.Budget.Monthly.Dollars(), 'f', 2, 64)}
	return render(c, status, views.JudgesPage(h.page(c, "Judges and endpoints", "models"), m))
}

func whenOrBuiltIn(t judge.Template) string {
	if t.CreatedAt.IsZero() {
		return "built in"
	}
	return views.When(t.CreatedAt) + " by"
}

// JudgeEndpointCreate registers an endpoint from the page's form.
func (h *Handlers) JudgeEndpointCreate(c echo.Context) error {
	form := views.EndpointForm{Name: c.FormValue("name"), BaseURL: c.FormValue("base_url"), Model: c.FormValue("model"),
		PriceIn: c.FormValue("price_per_million_input"), PriceOut: c.FormValue("price_per_million_output"),
		Temperature: c.FormValue("temperature"), MaxTokens: c.FormValue("max_tokens"), Concurrency: c.FormValue("concurrency")}
	in := endpoints.NewEndpoint{Name: form.Name, BaseURL: form.BaseURL, Model: form.Model, APIKey: c.FormValue("api_key")}
	bad := map[string]string{}
	number := func(field, s string, dst *float64) {
		if s == "" {
			return
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			bad[field] = "must be a number"
		}
		*dst = x
	}
	whole := func(field, s string) *int {
		if s == "" {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			bad[field] = "must be a whole number"
		}
		return &n
	}
	number("price_per_million_input", form.PriceIn, &in.PricePerMillionInput)
	number("price_per_million_output", form.PriceOut, &in.PricePerMillionOutput)
	if form.Temperature != "" {
		var t float64
		number("temperature", form.Temperature, &t)
		in.Temperature = &t
	}
	in.MaxTokens, in.Concurrency = whole("max_tokens", form.MaxTokens), whole("concurrency", form.Concurrency)
	if len(bad) == 0 {
		_, err := h.Endpoints.Create(ctx(c), actor(c), CallerOf(c).OrgID, in)
		var invalid *errs.Invalid
		if errors.As(err, &invalid) {
			bad = invalid.ByField()
		} else if err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		return h.renderJudges(c, http.StatusUnprocessableEntity, views.JudgesView{Endpoint: form, Errors: bad, Form: "endpoint",
			Template: views.TemplateForm{Name: judge.DefaultName}})
	}
	h.Sessions.Flash(c, "ok", "The endpoint "+form.Name+" is registered.")
	return redirect(c, "/evaluations/judges")
}

// JudgeTemplateSave writes a template's next version.
func (h *Handlers) JudgeTemplateSave(c echo.Context) error {
	form := views.TemplateForm{Name: c.FormValue("name"), Body: c.FormValue("body")}
	t, err := h.Judge.SaveTemplate(ctx(c), actor(c), CallerOf(c).OrgID, form.Name, form.Body)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderJudges(c, http.StatusUnprocessableEntity, views.JudgesView{Template: form, Errors: invalid.ByField(), Form: "template"})
	}
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Template %s is now at version %d.", t.Name, t.Version)
	if !t.Created {
		msg = fmt.Sprintf("Template %s is unchanged: version %d has this text.", t.Name, t.Version)
	}
	h.Sessions.Flash(c, "ok", msg)
	return redirect(c, "/evaluations/judges")
}

// JudgeTest asks the judge about a typed answer and shows what it said.
func (h *Handlers) JudgeTest(c echo.Context) error {
	form := views.JudgeTestForm{Endpoint: c.FormValue("endpoint"), Template: c.FormValue("template"), Query: c.FormValue("query"),
		Answer: c.FormValue("answer"), Reference: c.FormValue("reference")}
	m := views.JudgesView{Test: form, Form: "test", Template: views.TemplateForm{Name: judge.DefaultName}}
	v := &errs.Invalid{}
	v.Text("query", form.Query, 8000, true)
	v.Text("answer", form.Answer, 8000, true)
	v.Text("reference", form.Reference, 8000, false)
	if v.Has() {
		m.Errors = v.ByField()
		return h.renderJudges(c, http.StatusUnprocessableEntity, m)
	}
	j, err := h.Judge.Judge(ctx(c), CallerOf(c).OrgID, judge.Request{Endpoint: form.Endpoint, Template: form.Template, Purpose: "template test",
		Input: scorers.Input{Query: form.Query, Answer: form.Answer, Reference: form.Reference}})
	r := &views.JudgeResult{Score: strconv.FormatFloat(j.Score, 'f', 3, 64), Critique: j.Critique, Invalid: j.Invalid, Safety: j.Safety,
		Cached: j.Cached, Cost: pricing.Micros(j.Cost).String()}
	var invalid *errs.Invalid
	switch {
	case errors.As(err, &invalid):
		m.Errors = invalid.ByField()
		return h.renderJudges(c, http.StatusUnprocessableEntity, m)
	case err != nil:
		r.Error = judge.Describe(err)
	}
	m.Result = r
	return h.renderJudges(c, http.StatusOK, m)
}

// JudgeBudgetSave sets the monthly judge budget.
func (h *Handlers) JudgeBudgetSave(c echo.Context) error {
	raw := c.FormValue("monthly_budget")
	dollars, err := strconv.ParseFloat(raw, 64)
	if err == nil {
		err = h.Judge.SetBudget(ctx(c), actor(c), CallerOf(c).OrgID, pricing.Dollars(dollars))
	} else {
		err = errs.InvalidField("monthly_budget", "must be a number of dollars")
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		m := views.JudgesView{Errors: invalid.ByField(), Form: "budget", Template: views.TemplateForm{Name: judge.DefaultName}}
		return h.renderJudges(c, http.StatusUnprocessableEntity, m)
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The monthly judge budget is "+pricing.Dollars(dollars).String()+".")
	return redirect(c, "/evaluations/judges")
}
