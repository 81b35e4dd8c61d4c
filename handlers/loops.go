package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/loops"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/views"
)

// LoopList lists the organisation's loop policies.
func (h *Handlers) LoopList(c echo.Context) error {
	caller := CallerOf(c)
	list, err := h.Loops.List(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	v := views.LoopsView{CanEdit: caller.Role.AtLeast(auth.Admin)}
	for _, l := range list {
		row := views.LoopRow{ID: l.ID.String(), Name: l.Name, Model: l.RegisteredModel, Status: l.Status, Trigger: triggerText(l.Spec)}
		if r := l.LastRun; r != nil {
			row.LastRun, row.LastStatus, row.LastURL, row.LastWhen = "#"+strconv.Itoa(r.Number), r.Status, "/loops/runs/"+r.ID.String(), views.When(r.StartedAt)
		}
		v.Rows = append(v.Rows, row)
	}
	return render(c, http.StatusOK, views.LoopsPage(h.page(c, "Loops", "models"), v))
}

// triggerText says when a loop's runs start.
func triggerText(sp loops.Spec) string {
	n := 0
	if sp.Trigger.MinNewItems != nil {
		n = *sp.Trigger.MinNewItems
	}
	filter := "new items"
	if len(sp.Trigger.Filter) > 0 {
		var parts []string
		for _, k := range feedback.FilterParams {
			if v, ok := sp.Trigger.Filter[k]; ok {
				parts = append(parts, views.Label(k)+" "+filterValue(k, v))
			}
		}
		filter = "new items (" + strings.Join(parts, ", ") + ")"
	}
	switch {
	case sp.Trigger.Schedule != "" && n > 0:
		return fmt.Sprintf("%s, once %s arrived", views.Label(sp.Trigger.Schedule), views.Count(n, strings.TrimSuffix(filter, "s"), filter))
	case sp.Trigger.Schedule != "":
		return views.Label(sp.Trigger.Schedule)
	}
	return views.Count(n, strings.Replace(filter, "items", "item", 1), filter)
}

// loopDefaults are the new-loop form's values: seed 001's 1,000 new
// approved items, DPO at OpenAI, staged as candidate and promoted to
// production, the design's 10% → 50% → 100% rollout should one be chosen.
var loopDefaults = map[string]string{"min_new_items": "1000", "filter_status": "approved", "provider": "openai", "method": "dpo",
	"n_epochs": "auto", "max_cost_usd": "20", "deploy_alias": "candidate", "promote_alias": "production", "validation_percent": "20",
	"split_strategy": datasets.SplitRandom, "reward_formula": `{"judge": 1}`, "judge_template": "default", "approval": loops.ApproveNone,
	"rollout_steps": "10, 50, 100", "rollout_hold_hours": "24", "rollout_min_units": "100", "rollout_metric": experiments.ThumbsUpRate}

// loopInputs are the form's single-valued fields.
var loopInputs = []string{"name", "registered_model", "min_new_items", "schedule", "filter_status", "filter_type", "filter_tag",
	"filter_model", "dataset_name", "dataset_type", "min_strength", "validation_percent", "split_strategy", "provider", "method",
	"base_model", "n_epochs", "max_cost_usd", "golden_set_version_id", "judge_endpoint", "judge_template", "reward_formula",
	"deploy_target", "deploy_alias", "promote_target", "promote_alias", "rollout", "rollout_steps", "rollout_hold_hours",
	"rollout_min_units", "rollout_metric", "approval"}

// loopFields maps a policy's fields, as the service names them, to the
// form's: the first prefix that matches wins.
var loopFields = [][2]string{
	{"trigger.min_new_items", "min_new_items"}, {"trigger.schedule", "schedule"}, {"trigger.filter.status", "filter_status"},
	{"trigger.filter.type", "filter_type"}, {"trigger.filter.tag", "filter_tag"}, {"trigger.filter.model", "filter_model"},
	{"trigger", "filter_status"}, {"dataset.name", "dataset_name"}, {"dataset.generate.type", "dataset_type"},
	{"dataset.generate.min_strength", "min_strength"}, {"dataset.generate.validation_percent", "validation_percent"},
	{"dataset.generate.split_strategy", "split_strategy"}, {"dataset", "methods"}, {"training.provider", "provider"},
	{"training.method", "method"}, {"training.base_model", "base_model"}, {"training.hyperparameters", "n_epochs"},
	{"training.max_cost_usd", "max_cost_usd"}, {"training", "provider"},
	{"evaluation.golden_set_version_id", "golden_set_version_id"}, {"evaluation.judge.endpoint", "judge_endpoint"},
	{"evaluation.judge.template", "judge_template"}, {"evaluation", "reward_formula"}, {"deploy.promote_target", "promote_target"},
	{"deploy.target", "deploy_target"}, {"deploy.alias", "deploy_alias"}, {"promote_alias", "promote_alias"},
	{"rollout.steps", "rollout_steps"}, {"rollout.hold_minutes", "rollout_hold_hours"}, {"rollout.min_units_per_arm", "rollout_min_units"},
	{"rollout.metrics", "rollout_metric"}, {"rollout.guardrails", "rollout_guardrails"}, {"rollout", "rollout_steps"},
	{"registered_model", "registered_model"}, {"name", "name"}, {"approval", "approval"},
}

// loopErrors puts each of the service's messages beside its field.
func loopErrors(inv *errs.Invalid) map[string]string {
	out := map[string]string{}
	for _, fe := range inv.Errors {
		field := "form"
		for _, m := range loopFields {
			if fe.Field == m[0] || strings.HasPrefix(fe.Field, m[0]+".") || strings.HasPrefix(fe.Field, m[0]+"[") {
				field = m[1]
				break
			}
		}
		msg := fe.Message
		if field == "form" {
			msg = fe.Field + ": " + msg
		}
		if _, taken := out[field]; !taken {
			out[field] = msg
		}
	}
	return out
}

// LoopNew is the form that makes a loop.
func (h *Handlers) LoopNew(c echo.Context) error {
	values := map[string]string{}
	for k, v := range loopDefaults {
		values[k] = v
	}
	checked := map[string]bool{"methods:same_query": true, "methods:correction": true}
	return h.renderLoopForm(c, http.StatusOK, "", "", values, checked, nil)
}

// LoopCreate makes a loop from the form and opens its page; a refusal
// brings the form back as typed with each message beside its field.
func (h *Handlers) LoopCreate(c echo.Context) error {
	values, checked := loopFormValues(c)
	sp, bad := loopSpec(values, c.Request().Form)
	if bad.Has() {
		return h.renderLoopForm(c, http.StatusUnprocessableEntity, "", "", values, checked, loopErrors(bad))
	}
	l, err := h.Loops.Create(ctx(c), actor(c), CallerOf(c).OrgID, sp)
	var inv *errs.Invalid
	if errors.As(err, &inv) {
		return h.renderLoopForm(c, http.StatusUnprocessableEntity, "", "", values, checked, loopErrors(inv))
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The loop "+l.Name+" is active: a run starts once its trigger is met.")
	return redirect(c, "/loops/"+l.ID.String())
}

// LoopEdit is the form that changes a loop, filled with its policy.
func (h *Handlers) LoopEdit(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	l, err := h.Loops.Get(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	values, checked := loopValues(l.Spec)
	return h.renderLoopForm(c, http.StatusOK, id.String(), strconv.Itoa(int(l.Version)), values, checked, nil)
}

// LoopUpdate saves the edit form; runs under way go on with what they
// started with.
func (h *Handlers) LoopUpdate(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	// Another organisation's loop answers 404 whatever the form holds.
	if _, err := h.Loops.Get(ctx(c), CallerOf(c).OrgID, id); err != nil {
		return err
	}
	values, checked := loopFormValues(c)
	version := c.FormValue("version")
	sp, bad := loopSpec(values, c.Request().Form)
	if bad.Has() {
		return h.renderLoopForm(c, http.StatusUnprocessableEntity, id.String(), version, values, checked, loopErrors(bad))
	}
	n, _ := strconv.Atoi(version)
	l, err := h.Loops.Update(ctx(c), actor(c), CallerOf(c).OrgID, id, int32(n), sp)
	var inv *errs.Invalid
	var conflict *errs.Conflict
	switch {
	case errors.As(err, &inv):
		return h.renderLoopForm(c, http.StatusUnprocessableEntity, id.String(), version, values, checked, loopErrors(inv))
	case errors.As(err, &conflict):
		return h.renderLoopForm(c, http.StatusConflict, id.String(), version, values, checked, map[string]string{"form": conflict.Message})
	case err != nil:
		return err
	}
	h.Sessions.Flash(c, "ok", "The loop "+l.Name+" is saved: its next run follows it.")
	return redirect(c, "/loops/"+id.String())
}

// loopFormValues reads the form as typed.
func loopFormValues(c echo.Context) (map[string]string, map[string]bool) {
	values := map[string]string{}
	for _, f := range loopInputs {
		values[f] = strings.TrimSpace(c.FormValue(f))
	}
	checked := map[string]bool{}
	form, _ := c.FormParams()
	for _, field := range []string{"methods", "rollout_guardrails"} {
		for _, v := range form[field] {
			checked[field+":"+v] = true
		}
	}
	return values, checked
}

// loopSpec turns the form into a policy; what cannot be read (a number
// that is not one) is refused here, the rest by the service.
func loopSpec(v map[string]string, form url.Values) (loops.Spec, *errs.Invalid) {
	bad := &errs.Invalid{}
	num := func(field string, into *float64) {
		if v[field] == "" {
			return
		}
		f, err := strconv.ParseFloat(v[field], 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			bad.Add(loopSpecField(field), "must be a number")
			return
		}
		*into = f
	}
	whole := func(field string) *int {
		if v[field] == "" {
			return nil
		}
		n, err := strconv.Atoi(v[field])
		if err != nil {
			bad.Add(loopSpecField(field), "must be a whole number")
			return nil
		}
		return &n
	}
	sp := loops.Spec{Name: v["name"], RegisteredModel: v["registered_model"], Approval: v["approval"], PromoteAlias: v["promote_alias"]}
	sp.Trigger.MinNewItems = whole("min_new_items")
	if sp.Trigger.MinNewItems == nil && v["min_new_items"] == "" {
		zero := 0
		sp.Trigger.MinNewItems = &zero
	}
	sp.Trigger.Schedule = v["schedule"]
	sp.Trigger.Filter = loops.Filter{}
	for field, param := range map[string]string{"filter_status": "status", "filter_type": "type", "filter_tag": "tag", "filter_model": "model"} {
		if v[field] != "" {
			sp.Trigger.Filter[param] = v[field]
		}
	}
	sp.Dataset.Name = v["dataset_name"]
	r := &sp.Dataset.Generate
	r.Type, r.SplitStrategy = v["dataset_type"], v["split_strategy"]
	// Pair methods are for preference training: supervised training of an
	// instruction dataset takes the items themselves, whatever is ticked.
	if !pairsIgnored(v) {
		for _, m := range form["methods"] {
			r.Methods = append(r.Methods, pairs.Generation{Method: m})
		}
	}
	num("min_strength", &r.MinStrength)
	r.ValidationPercent = whole("validation_percent")
	t := &sp.Training
	t.Provider, t.Method, t.BaseModel = v["provider"], v["method"], v["base_model"]
	if e := v["n_epochs"]; e != "" && !strings.EqualFold(e, "auto") {
		if _, err := strconv.ParseFloat(e, 64); err != nil {
			bad.Add("training.hyperparameters.epochs", "must be a number, or auto")
		} else {
			t.Hyperparameters = map[string]json.RawMessage{"epochs": json.RawMessage(e)}
		}
	}
	num("max_cost_usd", &t.MaxCostUSD)
	e := &sp.Evaluation
	if id := v["golden_set_version_id"]; id != "" {
		parsed, err := uuid.Parse(id)
		if err != nil {
			bad.Add("evaluation.golden_set_version_id", "choose a golden set")
		}
		e.GoldenSetVersionID = parsed
	}
	if v["judge_endpoint"] != "" {
		e.Judge = &eval.JudgeConfig{Endpoint: v["judge_endpoint"], Template: v["judge_template"]}
	}
	if f := v["reward_formula"]; f != "" {
		if !json.Valid([]byte(f)) {
			bad.Add("evaluation.reward_formula", `must be JSON weights by scorer, such as {"judge": 1}`)
		} else {
			e.RewardFormula = json.RawMessage(f)
		}
	}
	sp.Deploy = loops.Deploy{Target: v["deploy_target"], Alias: v["deploy_alias"], PromoteTarget: v["promote_target"]}
	if v["rollout"] == "1" {
		ro := &loops.RolloutSpec{Guardrails: form["rollout_guardrails"]}
		if v["rollout_metric"] != "" {
			ro.Metrics = []string{v["rollout_metric"]}
		}
		for _, part := range strings.Split(v["rollout_steps"], ",") {
			part = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(part), "%"))
			if part == "" {
				continue
			}
			f, err := strconv.ParseFloat(part, 64)
			if err != nil {
				bad.Add("rollout.steps", "must be percentages separated by commas: 10, 50, 100")
				break
			}
			ro.Steps = append(ro.Steps, f/100)
		}
		var hours float64
		num("rollout_hold_hours", &hours)
		ro.HoldMins = int(math.Round(hours * 60))
		if n := whole("rollout_min_units"); n != nil {
			ro.MinUnits = *n
		}
		sp.Rollout = ro
	}
	return sp, bad
}

// pairsIgnored says the form's pair methods do not apply: supervised
// training on the instruction dataset it follows.
func pairsIgnored(v map[string]string) bool {
	return v["method"] == string(provider.Supervised) && (v["dataset_type"] == "" || v["dataset_type"] == datasets.TypeInstructionTuning)
}

// loopSpecField is the policy's name of a form field, for messages the
// form raises itself.
func loopSpecField(field string) string {
	for _, m := range loopFields {
		if m[1] == field {
			return m[0]
		}
	}
	return field
}

// loopValues fills the form from a policy.
func loopValues(sp loops.Spec) (map[string]string, map[string]bool) {
	v := map[string]string{"name": sp.Name, "registered_model": sp.RegisteredModel, "schedule": sp.Trigger.Schedule,
		"filter_status": sp.Trigger.Filter["status"], "filter_type": sp.Trigger.Filter["type"], "filter_tag": sp.Trigger.Filter["tag"],
		"filter_model": sp.Trigger.Filter["model"], "dataset_name": sp.Dataset.Name, "dataset_type": sp.Dataset.Generate.Type,
		"split_strategy": sp.Dataset.Generate.SplitStrategy, "provider": sp.Training.Provider, "method": sp.Training.Method,
		"base_model": sp.Training.BaseModel, "n_epochs": "auto", "max_cost_usd": strconv.FormatFloat(sp.Training.MaxCostUSD, 'f', -1, 64),
		"deploy_target": sp.Deploy.Target, "deploy_alias": sp.Deploy.Alias, "promote_target": sp.Deploy.PromoteTarget,
		"promote_alias": sp.PromoteAlias, "approval": sp.Approval, "rollout_steps": "10, 50, 100", "rollout_hold_hours": "24",
		"rollout_min_units": "100", "rollout_metric": experiments.ThumbsUpRate}
	if sp.Trigger.MinNewItems != nil {
		v["min_new_items"] = strconv.Itoa(*sp.Trigger.MinNewItems)
	}
	if sp.Dataset.Generate.MinStrength > 0 {
		v["min_strength"] = strconv.FormatFloat(sp.Dataset.Generate.MinStrength, 'f', -1, 64)
	}
	if p := sp.Dataset.Generate.ValidationPercent; p != nil {
		v["validation_percent"] = strconv.Itoa(*p)
	}
	for _, key := range []string{"epochs", "n_epochs", "epochCount"} {
		if raw, ok := sp.Training.Hyperparameters[key]; ok {
			v["n_epochs"] = strings.Trim(string(raw), `"`)
		}
	}
	if sp.Evaluation.GoldenSetVersionID != uuid.Nil {
		v["golden_set_version_id"] = sp.Evaluation.GoldenSetVersionID.String()
	}
	if j := sp.Evaluation.Judge; j != nil {
		v["judge_endpoint"], v["judge_template"] = j.Endpoint, j.Template
	}
	if len(sp.Evaluation.RewardFormula) > 0 {
		v["reward_formula"] = string(sp.Evaluation.RewardFormula)
	}
	checked := map[string]bool{}
	for _, g := range sp.Dataset.Generate.Methods {
		checked["methods:"+g.Method] = true
	}
	if ro := sp.Rollout; ro != nil {
		v["rollout"] = "1"
		var shares []string
		for _, s := range ro.Steps {
			shares = append(shares, strconv.FormatFloat(s*100, 'f', -1, 64))
		}
		v["rollout_steps"] = strings.Join(shares, ", ")
		v["rollout_hold_hours"] = strconv.FormatFloat(float64(ro.HoldMins)/60, 'f', -1, 64)
		v["rollout_min_units"] = strconv.Itoa(ro.MinUnits)
		if len(ro.Metrics) > 0 {
			v["rollout_metric"] = ro.Metrics[0]
		}
		for _, g := range ro.Guardrails {
			checked["rollout_guardrails:"+g] = true
		}
	}
	return v, checked
}

func options(values ...string) []views.Option {
	out := make([]views.Option, len(values))
	for i, v := range values {
		out[i] = views.Option{Value: v, Label: views.Label(v)}
	}
	return out
}

func (h *Handlers) renderLoopForm(c echo.Context, status int, id, version string, values map[string]string, checked map[string]bool,
	problems map[string]string) error {
	ch, err := h.Loops.Choices(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	v := views.LoopFormView{ID: id, Version: version, Values: values, Errors: problems, Checked: checked, Gate: ch.Gate,
		PairMethods:  options(ch.PairMethods...),
		Schedules:    append([]views.Option{{Value: "", Label: "none: when enough items are new"}}, options(loops.Schedules...)...),
		Statuses:     append([]views.Option{{Value: "", Label: "any"}}, options(feedback.Statuses...)...),
		Types:        append([]views.Option{{Value: "", Label: "any"}}, options(feedback.Types...)...),
		DatasetTypes: append([]views.Option{{Value: "", Label: "follow the method"}}, options(datasets.Types...)...),
		Splits:       options(datasets.SplitStrategies...), Approvals: options(loops.Approvals...),
		Metrics: append([]views.Option{{Value: "", Label: "none"}}, options(experiments.Metrics...)...),
	}
	for _, m := range ch.Methods {
		v.TrainMethods = append(v.TrainMethods, views.Option{Value: m, Label: views.MethodLabel(m)})
	}
	v.Approvals[0].Label = approvalText(loops.ApproveNone)
	for _, p := range ch.Providers {
		v.Providers = append(v.Providers, views.Option{Value: p.Value, Label: p.Label})
	}
	if ch.Gate != "" {
		v.GoldenSets = []views.Option{{Value: "", Label: "the gate's: " + ch.Gate}}
	} else {
		v.GoldenSets = []views.Option{{Value: "", Label: "choose…"}}
	}
	for _, g := range ch.GoldenSets {
		v.GoldenSets = append(v.GoldenSets, views.Option{Value: g.Value, Label: g.Label})
	}
	v.Endpoints = append([]views.Option{{Value: "", Label: "none"}}, options(ch.Endpoints...)...)
	v.Templates = options(ch.Templates...)
	if len(v.Templates) == 0 {
		v.Templates = options("default")
	}
	v.Targets = append([]views.Option{{Value: "", Label: "choose…"}}, options(ch.Targets...)...)
	for i := range v.Endpoints[1:] {
		v.Endpoints[i+1].Label = v.Endpoints[i+1].Value
	}
	for i := range v.Targets[1:] {
		v.Targets[i+1].Label = v.Targets[i+1].Value
	}
	for i := range v.Templates {
		v.Templates[i].Label = v.Templates[i].Value
	}
	title := "New loop"
	if id != "" {
		title = "Edit " + values["name"]
	}
	return render(c, status, views.LoopFormPage(h.page(c, title, "models"), v))
}

// Loop is a loop's page: its policy and its runs as a timeline.
func (h *Handlers) Loop(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	l, err := h.Loops.Get(ctx(c), caller.OrgID, id)
	if err != nil {
		return err
	}
	cursor, err := keyset.Parse(loops.RunListName, c.QueryParam("cursor"))
	if err != nil {
		return err
	}
	runs, next, err := h.Loops.Runs(ctx(c), caller.OrgID, id, cursor, 20)
	if err != nil {
		return err
	}
	admin := caller.Role.AtLeast(auth.Admin)
	goldenSet := "its golden set"
	if g, err := h.Eval.Get(ctx(c), caller.OrgID, l.Evaluation.GoldenSetVersionID); err == nil {
		goldenSet = g.Name
	}
	v := views.LoopView{ID: id.String(), Name: l.Name, Model: l.RegisteredModel, Status: l.Status, CanEdit: admin, Facts: loopFacts(l.Spec, goldenSet)}
	for _, r := range runs {
		v.Runs = append(v.Runs, runView(r, admin))
		if r.Status == loops.RunRunning || r.Status == loops.RunWaitingApproval {
			v.Busy = true
		}
	}
	if next != nil {
		v.NextURL = "/loops/" + id.String() + "?cursor=" + url.QueryEscape(next.Encode(loops.RunListName))
	}
	return render(c, http.StatusOK, views.LoopPage(h.page(c, l.Name, "models"), v))
}

// loopFacts is a policy in words; goldenSet names its golden set.
func loopFacts(sp loops.Spec, goldenSet string) []views.Fact {
	training := fmt.Sprintf("%s at %s", views.Label(sp.Training.Method), views.Label(sp.Training.Provider))
	if sp.Training.BaseModel != "" {
		training += " on " + sp.Training.BaseModel
	}
	training += fmt.Sprintf(", the estimate at most $%s", strconv.FormatFloat(sp.Training.MaxCostUSD, 'f', -1, 64))
	recipe := views.Label(sp.Dataset.Generate.Type)
	if len(sp.Dataset.Generate.Methods) > 0 {
		var ms []string
		for _, g := range sp.Dataset.Generate.Methods {
			ms = append(ms, views.Label(g.Method))
		}
		recipe += ": pairs by " + strings.Join(ms, ", ")
	}
	evaluation := "on " + goldenSet
	if j := sp.Evaluation.Judge; j != nil {
		evaluation += fmt.Sprintf(", judged by %s with the %s template", j.Endpoint, cmp.Or(j.Template, "default"))
	}
	evaluation += "; the organisation's gate applies"
	formula := ""
	if len(sp.Evaluation.RewardFormula) > 0 {
		evaluation += "; reward weights"
		formula = string(sp.Evaluation.RewardFormula)
	}
	toProd := "promoted to " + sp.PromoteAlias + " on " + sp.Deploy.PromoteTarget + " once the gate lets it through"
	if ro := sp.Rollout; ro != nil {
		var shares []string
		for _, s := range ro.Steps {
			shares = append(shares, strconv.FormatFloat(s*100, 'f', -1, 64)+"%")
		}
		toProd = fmt.Sprintf("rolled out against %s through an A/B test (%s, %s a step)", sp.PromoteAlias, strings.Join(shares, " → "),
			(time.Duration(ro.HoldMins) * time.Minute).String())
	}
	return []views.Fact{
		{Term: "Model", Desc: sp.RegisteredModel},
		{Term: "Starts", Desc: triggerText(sp)},
		{Term: "Dataset", Desc: sp.Dataset.Name + " (" + recipe + ")"},
		{Term: "Training", Desc: training},
		{Term: "Evaluation", Desc: evaluation, Code: formula},
		{Term: "Staged", Desc: "under " + sp.Deploy.Alias + " on " + sp.Deploy.Target},
		{Term: "Production", Desc: toProd},
		{Term: "Approval", Desc: approvalText(sp.Approval)},
	}
}

// stepLinks are a step's artefacts as links to their pages.
func stepLinks(links map[string]string) []views.Link {
	var out []views.Link
	if f, ok := links["feedback_filter"]; ok {
		out = append(out, views.Link{Label: "Items", URL: feedbackQueueURL(mustQuery(f))})
	}
	for _, l := range []struct{ key, label, path string }{
		{"dataset_id", "Dataset", "/datasets/"}, {"dataset_version_id", "", ""}, {"fine_tuning_job_id", "Training job", "/fine-tuning/jobs/"},
		{"model_version_id", "Model version", "/models/versions/"}, {"deployment_id", "Deployment", ""},
		{"evaluation_run_id", "Evaluation", "/evaluations/runs/"}, {"experiment_key", "Experiment", "/experiments/"},
	} {
		id, ok := links[l.key]
		if !ok || l.path == "" {
			continue
		}
		out = append(out, views.Link{Label: l.label, URL: l.path + id})
	}
	// A deployment is shown among its version's deployments.
	if _, ok := links["deployment_id"]; ok {
		if mv, ok := links["model_version_id"]; ok {
			out = append(out, views.Link{Label: "Deployment", URL: "/models/versions/" + mv + "#deployments"})
		}
	}
	// A frozen version is shown on its dataset's page.
	if _, ok := links["dataset_version_id"]; ok {
		for i, l := range out {
			if l.Label == "Dataset" {
				out[i] = views.Link{Label: "Frozen version", URL: "/datasets/" + links["dataset_id"] + "#versions"}
			}
		}
	}
	return out
}

func runView(r loops.Run, admin bool) views.LoopRunView {
	v := views.LoopRunView{ID: r.ID.String(), URL: "/loops/runs/" + r.ID.String(), Loop: r.Loop, LoopURL: "/loops/" + r.LoopID.String(),
		Number: r.Number, Status: r.Status, Reason: r.Reason, StartedBy: startedBy(r), StartedAt: views.When(r.CreatedAt),
		WaitingFor: r.WaitingFor, Approvers: r.Approvers, ApprovedBy: r.ApprovedBy, CanAct: admin,
		Open: r.Status == loops.RunRunning || r.Status == loops.RunWaitingApproval}
	if r.FinishedAt != nil {
		v.FinishedAt = views.When(*r.FinishedAt)
	}
	if r.CostUSD > 0 {
		v.Cost = fmt.Sprintf("$%.4f", r.CostUSD)
	}
	if r.Status != loops.RunWaitingApproval {
		v.WaitingFor = ""
	}
	for _, s := range r.Steps {
		sv := views.LoopStepView{Name: s.Name, Status: s.Status, Detail: s.Detail, Links: stepLinks(s.Links)}
		if s.StartedAt != nil {
			sv.Started = views.When(*s.StartedAt)
			if s.FinishedAt != nil {
				sv.Took = took(s.FinishedAt.Sub(*s.StartedAt))
			}
		}
		if s.CostUSD > 0 {
			sv.Cost = fmt.Sprintf("$%.4f", s.CostUSD)
		}
		v.Steps = append(v.Steps, sv)
	}
	return v
}

func startedBy(r loops.Run) string {
	switch r.StartedBy {
	case loops.ByItems:
		return "its trigger (enough new items)"
	case loops.BySchedule:
		return "its schedule"
	}
	return r.StartedByLabel
}

// took is a step's duration, rounded for reading.
func took(d time.Duration) string {
	switch {
	case d < time.Second:
		return "under a second"
	case d < time.Minute:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// LoopRun is a run's page: its pipeline and every step's detail.
func (h *Handlers) LoopRun(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	r, err := h.Loops.GetRun(ctx(c), caller.OrgID, id)
	if err != nil {
		return err
	}
	v := runView(r, caller.Role.AtLeast(auth.Admin))
	return render(c, http.StatusOK, views.LoopRunPage(h.page(c, fmt.Sprintf("%s · run #%d", r.Loop, r.Number), "models"), v))
}

// LoopRunNow starts a run of a loop from its page.
func (h *Handlers) LoopRunNow(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := h.Loops.StartNow(ctx(c), actor(c), CallerOf(c).OrgID, id)
	var conflict *errs.Conflict
	if errors.As(err, &conflict) {
		h.Sessions.Flash(c, "error", conflict.Message)
		return redirect(c, "/loops/"+id.String())
	}
	if err != nil {
		return err
	}
	h.Sessions.FlashLink(c, "ok", fmt.Sprintf("Run #%d started.", r.Number), "/loops/runs/"+r.ID.String(), "Follow it")
	return redirect(c, "/loops/"+id.String())
}

// LoopStatus pauses a loop or makes it active.
func (h *Handlers) LoopStatus(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	l, err := h.Loops.SetStatus(ctx(c), actor(c), CallerOf(c).OrgID, id, c.FormValue("status"))
	if err != nil {
		return err
	}
	if l.Status == loops.StatusPaused {
		h.Sessions.Flash(c, "ok", "The loop is paused: its trigger starts no run until it is active again.")
	} else {
		h.Sessions.Flash(c, "ok", "The loop is active.")
	}
	return redirect(c, "/loops/"+id.String())
}

// LoopRunApprove approves a waiting run from a page.
func (h *Handlers) LoopRunApprove(c echo.Context) error {
	return h.loopRunAct(c, h.Loops.Approve, "Approved: the run goes on.")
}

// LoopRunStop stops a run from a page.
func (h *Handlers) LoopRunStop(c echo.Context) error {
	return h.loopRunAct(c, h.Loops.Stop, "The run is stopped.")
}

func (h *Handlers) loopRunAct(c echo.Context, act func(context.Context, audit.Actor, uuid.UUID, uuid.UUID) (loops.Run, error), done string) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := act(ctx(c), actor(c), CallerOf(c).OrgID, id)
	var conflict *errs.Conflict
	if errors.As(err, &conflict) {
		h.Sessions.Flash(c, "error", conflict.Message)
		return redirect(c, "/loops/runs/"+id.String())
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", done)
	return redirect(c, "/loops/runs/"+r.ID.String())
}

// loopOrigin is the loop run an artefact came from, for its page; nil
// when none made it (or the lookup fails: the page goes on without it).
func (h *Handlers) loopOrigin(c echo.Context, kind, id string) *views.LoopOrigin {
	if h.Loops == nil {
		return nil
	}
	a, ok, err := h.Loops.RunOf(ctx(c), CallerOf(c).OrgID, kind, id)
	if err != nil {
		h.Log.Warn("finding an artefact's loop run", "kind", kind, "id", id, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	return &views.LoopOrigin{Loop: a.Loop, LoopURL: "/loops/" + a.LoopID.String(), Run: "#" + strconv.Itoa(a.Number),
		RunURL: "/loops/runs/" + a.RunID.String(), Step: a.Step, Status: a.Status}
}

// approvalText says where a person must approve.
func approvalText(a string) string {
	if a == loops.ApproveNone {
		return "None: the loop takes a new version from new data to production by itself"
	}
	return views.Label(a)
}
