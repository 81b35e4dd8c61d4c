package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/views"
)

// versionsPerModel is how many versions of each model the registry page
// lists, newest first.
const versionsPerModel = 20

// ModelRegistry is the model registry page.
func (h *Handlers) ModelRegistry(c echo.Context) error {
	return h.renderModels(c, http.StatusOK, views.RegisterModelForm{}, nil)
}

func (h *Handlers) renderModels(c echo.Context, status int, form views.RegisterModelForm, problems map[string]string) error {
	caller := CallerOf(c)
	m := views.ModelsView{IsAdmin: caller.Role.AtLeast(auth.Admin), Form: form, Errors: problems}
	registered, err := h.Models.Models(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	for _, rm := range registered {
		versions, _, err := h.Models.List(ctx(c), caller.OrgID, models.Filter{Name: rm.Name}, nil, versionsPerModel)
		if err != nil {
			return err
		}
		mv := views.RegisteredModelView{Name: rm.Name, Description: rm.Description, Tags: rm.Tags}
		for _, v := range versions {
			for _, a := range v.Aliases {
				mv.Aliases = append(mv.Aliases, views.AliasView{Alias: a, Version: v.Version, VersionID: v.ID.String()})
			}
			row := views.ModelVersionRow{ID: v.ID.String(), Version: v.Version, Status: v.Status, Kind: v.Kind, Aliases: v.Aliases,
				Source: "Registered by hand", TrainLoss: loss(v.TrainLoss), CreatedAt: views.When(v.CreatedAt), DeployedAt: views.WhenPtr(v.DeployedAt)}
			if v.FineTuningJobID != nil {
				row.Source, row.SourceLink = "Fine-tuning job "+v.FineTuningJobID.String()[:8], "/fine-tuning/jobs/"+v.FineTuningJobID.String()
			}
			mv.Versions = append(mv.Versions, row)
		}
		mv.CompareURL = registryCompareURL(versions)
		m.Models = append(m.Models, mv)
	}
	if m.IsAdmin {
		targets, err := h.Models.Targets(ctx(c), caller.OrgID)
		if err != nil {
			return err
		}
		m.Targets = len(targets)
	}
	return render(c, status, views.ModelsPage(h.page(c, "Model registry", "models"), m))
}

func loss(v *float64) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(*v, 'f', 4, 64)
}

// ModelRegister registers a model by hand from the registry page's form.
func (h *Handlers) ModelRegister(c echo.Context) error {
	form := views.RegisterModelForm{Name: c.FormValue("name"), Version: c.FormValue("version"), ModelID: c.FormValue("model_id"),
		BaseModel: c.FormValue("base_model"), Kind: c.FormValue("kind"), Description: c.FormValue("description")}
	v, err := h.Models.Register(ctx(c), actor(c), CallerOf(c).OrgID, models.NewVersion{Name: form.Name, Version: form.Version,
		ModelID: form.ModelID, BaseModel: form.BaseModel, Kind: form.Kind, Description: form.Description})
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderModels(c, http.StatusUnprocessableEntity, form, invalid.ByField())
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", fmt.Sprintf("Registered %s %s.", v.Name, v.Version))
	return redirect(c, "/models/versions/"+v.ID.String())
}

// ModelVersion is a version's page.
func (h *Handlers) ModelVersion(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	m, err := h.modelVersionView(c, id)
	if err != nil {
		return err
	}
	return h.renderModelVersion(c, http.StatusOK, m)
}

// ModelVersionDeployments is the version page's deployments table, which
// polls itself while a deployment is under way.
func (h *Handlers) ModelVersionDeployments(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	m, err := h.modelVersionView(c, id)
	if err != nil {
		return err
	}
	if !m.Active {
		// The deployment ended: reload the whole page, whose status,
		// aliases and history changed with it, saying how it ended.
		if len(m.Deployments) > 0 {
			h.flashDeployment(c, m.Name+" "+m.Version, m.Deployments[0])
		}
		c.Response().Header().Set("HX-Refresh", "true")
	}
	return render(c, http.StatusOK, views.ModelDeployments(m))
}

// flashDeployment says on the reloaded page how the newest deployment of
// a version ended.
func (h *Handlers) flashDeployment(c echo.Context, version string, d views.DeploymentRow) {
	where := ""
	if d.Target != "" {
		where = " on " + d.Target
	}
	switch {
	case d.Status == "succeeded" && d.Alias != "":
		h.Sessions.Flash(c, "ok", fmt.Sprintf("Deployed: %s now serves %q%s.", version, d.Alias, where))
	case d.Status == "succeeded":
		h.Sessions.Flash(c, "ok", fmt.Sprintf("Done: %s is served%s.", version, where))
	case d.Status == "failed":
		h.Sessions.Flash(c, "error", fmt.Sprintf("The deployment of %s%s failed: %s", version, where, d.Error))
	}
}

func (h *Handlers) renderModelVersion(c echo.Context, status int, m views.ModelVersionView) error {
	m.Loop = h.loopOrigin(c, "model_version_id", m.ID)
	return render(c, status, views.ModelVersionPage(h.page(c, m.Name+" "+m.Version, "models"), m))
}

func (h *Handlers) modelVersionView(c echo.Context, id uuid.UUID) (views.ModelVersionView, error) {
	caller := CallerOf(c)
	v, err := h.Models.Get(ctx(c), caller.OrgID, id)
	if err != nil {
		return views.ModelVersionView{}, err
	}
	m := views.ModelVersionView{IsAdmin: caller.Role.AtLeast(auth.Admin), ID: v.ID.String(), Name: v.Name, Version: v.Version,
		Status: v.Status, Kind: v.Kind, ModelID: v.ModelID, BaseModel: v.BaseModel, CreatedBy: v.CreatedBy,
		CreatedAt: views.When(v.CreatedAt), DeployedAt: views.WhenPtr(v.DeployedAt), Aliases: v.Aliases,
		Deploy: views.DeployForm{Alias: "production"}, RollbackAliases: v.Aliases, Number: v.Version,
		EvaluateURL: "/evaluations?candidate_version_id=" + v.ID.String() + "#start-evaluation"}
	if v.FineTuningJobID != nil {
		job := &views.LineageJob{ID: v.FineTuningJobID.String(), Label: "job " + v.FineTuningJobID.String()[:8],
			TrainLoss: loss(v.TrainLoss), ValidLoss: loss(v.ValidLoss), TrainedTokens: strconv.FormatInt(v.TrainedTokens, 10), Cost: "—"}
		if v.CostUSD != nil {
			job.Cost = pricing.Micros(int64(*v.CostUSD * 1e6)).String()
		}
		m.Job = job
	}
	m.Evaluation = versionEvaluation(v.Evaluation)
	m.CompareURL = "/models/compare?b=" + v.ID.String()
	switch prod, err := h.Models.AliasVersion(ctx(c), caller.OrgID, v.Name, models.Production); {
	case err == nil && prod != v.ID:
		m.CompareURL = "/models/compare?a=" + prod.String() + "&b=" + v.ID.String()
	case err != nil && !errors.Is(err, errs.ErrNotFound):
		return m, err
	}
	lin, err := h.Models.Lineage(ctx(c), caller.OrgID, v)
	if err != nil {
		return m, err
	}
	if m.Shadow, err = h.versionShadow(c, v.ID); err != nil {
		return m, err
	}
	if d := lin.Dataset; d != nil {
		m.Dataset = &views.LineageDataset{ID: d.DatasetID.String(), Name: d.DatasetName, Number: strconv.Itoa(int(d.Number)),
			Hash: d.ContentHash, Items: int(d.ItemCount), Train: int(d.TrainCount), Validation: int(d.ValidationCount)}
	}
	for _, s := range lin.Sources {
		m.Sources = append(m.Sources, views.LineageSource{Label: sourceLabel(s), Count: s.Count})
	}
	for _, it := range lin.Items {
		li := views.LineageItem{Query: it.Query, Split: it.Split}
		if it.IsFeedback {
			li.Link = "/feedback/" + it.SourceID.String()
		} else {
			li.Link = "/pairs/" + it.SourceID.String()
		}
		if it.FeedbackID != uuid.Nil {
			li.FeedbackLink = "/feedback/" + it.FeedbackID.String()
		}
		m.Items = append(m.Items, li)
	}
	deployments, err := h.Models.Deployments(ctx(c), caller.OrgID, id)
	if err != nil {
		return m, err
	}
	var targets []string
	for _, d := range deployments {
		action := d.Action
		if d.ReloadOf != nil {
			action = "reload"
		}
		m.Deployments = append(m.Deployments, views.DeploymentRow{ID: d.ID.String(), Status: d.Status, Action: action, Alias: d.Alias,
			Target: d.Target, Reason: d.Reason, Error: d.Error, By: d.CreatedBy, CreatedAt: views.When(d.CreatedAt), FinishedAt: views.WhenPtr(d.FinishedAt)})
		m.Active = m.Active || d.Status == "queued" || d.Status == "running"
		targets = append(targets, d.Target)
	}
	if m.Health, err = h.targetHealth(c, targets); err != nil {
		return m, err
	}
	gate, err := h.Models.GateStatus(ctx(c), caller.OrgID, id)
	if err != nil {
		return m, err
	}
	m.Gate = views.GateView{Set: gate.Set, GoldenSet: gate.GoldenSet, Evaluated: gate.Evaluation != uuid.Nil, Reasons: gate.Reasons, Next: gate.Next}
	for _, o := range gate.Overrides {
		m.Gate.Overrides = append(m.Gate.Overrides, views.GateOverrideView{Reason: o.Reason, By: o.By, At: views.When(o.At)})
	}
	runs, err := h.Eval.Runs(ctx(c), caller.OrgID, &id)
	if err != nil {
		return m, err
	}
	m.Gate.Runs = runRows(runs)
	history, _, err := h.Models.History(ctx(c), caller.OrgID, id, 0, 100)
	if err != nil {
		return m, err
	}
	for _, e := range history {
		m.History = append(m.History, views.HistoryRow{At: views.When(e.At), Actor: e.Actor, Action: e.Action, Alias: e.Alias,
			From: e.FromVersion, To: e.ToVersion, Target: e.Target, Reason: e.Reason, Result: e.Result})
	}
	if m.IsAdmin {
		targets, err := h.Models.Targets(ctx(c), caller.OrgID)
		if err != nil {
			return m, err
		}
		// Only targets that can take the version's kind are offered.
		for _, t := range targets {
			if !models.Takes(t.Kind, v.Kind) {
				m.OtherTargets++
				continue
			}
			m.Targets = append(m.Targets, views.Option{Value: t.Name, Label: t.Name + " (" + targetKind(t.Kind) + ")"})
		}
	}
	return m, nil
}

// versionEvaluation is what a version's page shows of its newest finished
// evaluation; nil when none finished.
func versionEvaluation(e *models.Evaluation) *views.VersionEvaluationView {
	if e == nil {
		return nil
	}
	out := &views.VersionEvaluationView{RunURL: "/evaluations/runs/" + e.RunID.String(), GoldenSet: e.GoldenSet, GoldenSetHash: e.GoldenSetHash,
		Mean: reward3(e.MeanReward), Interval: interval(e.CI), Items: e.Items, Invalid: e.Invalid, JudgeCalls: e.JudgeCalls,
		JudgeCost: pricing.Dollars(e.JudgeCostUSD).String(), AnswerCost: pricing.Dollars(e.AnswerCostUSD).String(),
		Formula: e.Formula, Finished: views.When(e.FinishedAt)}
	switch ms := e.MeanLatencyMS; {
	case ms == nil:
	case *ms < 1000:
		out.Latency = strconv.FormatFloat(*ms, 'f', 0, 64) + " ms"
	default:
		out.Latency = strconv.FormatFloat(*ms/1000, 'f', 1, 64) + " s"
	}
	for _, sp := range e.Splits {
		out.Splits = append(out.Splits, views.VersionEvaluationSplit{Split: sp.Split, Items: sp.Items, Mean: reward3(sp.MeanReward), Interval: interval(sp.CI)})
	}
	return out
}

// registryCompareURL compares a model's newest version (versions come
// newest first) with the one in production, or with the one before it;
// "" when the model has one version.
func registryCompareURL(versions []models.Version) string {
	if len(versions) < 2 {
		return ""
	}
	newest, base := versions[0], versions[1]
	for _, v := range versions {
		if slices.Contains(v.Aliases, models.Production) && v.ID != newest.ID {
			base = v
		}
	}
	return "/models/compare?a=" + base.ID.String() + "&b=" + newest.ID.String()
}

// interval writes a 95% interval, or says there is none.
func interval(ci []float64) string {
	if len(ci) != 2 {
		return "—"
	}
	return fmt.Sprintf("%.3f to %.3f", ci[0], ci[1])
}

func targetKind(kind string) string {
	switch kind {
	case serving.KindVLLM:
		return "vLLM"
	case serving.KindOpenAI:
		return "provider-hosted"
	case serving.KindVLLMPooling:
		return "vLLM pooling runner"
	}
	return views.Label(kind)
}

// sourceLabel says where training items came from, in words.
func sourceLabel(s models.Source) string {
	if s.Kind == "pair" {
		return "Pairs, " + views.Label(s.Source)
	}
	label := "Feedback from " + views.Label(s.Source)
	if s.Corrected {
		label += ", corrected by a curator"
	}
	return label
}

// ModelDeploy starts a deployment from the version page, or from the
// evaluation form's offer to stage a version (then=evaluate), which goes
// back to the form. A refusal shows beside the deploy button: htmx swaps
// the deploy card for itself, so the address stays the version's page.
func (h *Handlers) ModelDeploy(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	in := models.DeployRequest{Alias: c.FormValue("alias"), Target: c.FormValue("target"), Reason: c.FormValue("reason")}
	d, err := h.Models.Deploy(ctx(c), actor(c), CallerOf(c).OrgID, id, in)
	if err != nil {
		fields, ok := formRefusal(err, "deploy")
		if !ok {
			return err
		}
		m, verr := h.modelVersionView(c, id)
		if verr != nil {
			return verr
		}
		m.Deploy = views.DeployForm{Alias: in.Alias, Target: in.Target, Reason: in.Reason}
		m.Errors = fields
		if isHTMX(c) {
			return render(c, http.StatusUnprocessableEntity, views.DeployCard(h.page(c, m.Name+" "+m.Version, "models"), m))
		}
		return h.renderModelVersion(c, http.StatusUnprocessableEntity, m)
	}
	if c.FormValue("then") == "evaluate" {
		h.Sessions.Flash(c, "ok", fmt.Sprintf("Deploying under %q on %s: the evaluation can start once the target serves it.", d.Alias, d.Target))
		return redirect(c, "/evaluations?candidate_version_id="+id.String()+"#start-evaluation")
	}
	h.Sessions.Flash(c, "ok", fmt.Sprintf("Deploying under %q on %s: the alias moves once the target serves it.", d.Alias, d.Target))
	return redirect(c, "/models/versions/"+id.String())
}

// formRefusal is a refused form's messages by field: a field's own, or a
// conflict's under whole (the form as a whole). ok is false for other
// errors, which go the usual way.
func formRefusal(err error, whole string) (map[string]string, bool) {
	var invalid *errs.Invalid
	var conflict *errs.Conflict
	switch {
	case errors.As(err, &invalid):
		return invalid.ByField(), true
	case errors.As(err, &conflict):
		return map[string]string{whole: conflict.Message}, true
	}
	return nil, false
}

// ModelRollback puts back the version an alias served before.
func (h *Handlers) ModelRollback(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	in := models.RollbackRequest{Alias: c.FormValue("alias"), Reason: c.FormValue("reason")}
	d, err := h.Models.Rollback(ctx(c), actor(c), CallerOf(c).OrgID, id, in)
	if err != nil {
		return h.versionFormError(c, id, err, func(m *views.ModelVersionView, fields map[string]string) {
			m.Errors = map[string]string{}
			for f, msg := range fields {
				m.Errors["rollback_"+f] = msg
			}
		})
	}
	h.Sessions.Flash(c, "ok", fmt.Sprintf("Rolling back %q on %s.", d.Alias, d.Target))
	return redirect(c, "/models/versions/"+d.VersionID.String())
}

// ModelNumber renumbers a version that is still testing.
func (h *Handlers) ModelNumber(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	number := c.FormValue("version")
	v, err := h.Models.Update(ctx(c), actor(c), CallerOf(c).OrgID, id, models.Patch{Version: &number})
	if err != nil {
		return h.versionFormError(c, id, err, func(m *views.ModelVersionView, fields map[string]string) {
			m.Number, m.Errors = number, fields
		})
	}
	h.Sessions.Flash(c, "ok", fmt.Sprintf("%s is now numbered %s.", v.Name, v.Version))
	return redirect(c, "/models/versions/"+id.String())
}

// ModelGateOverride records an admin's override of a failing gate.
func (h *Handlers) ModelGateOverride(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := h.Eval.Override(ctx(c), actor(c), CallerOf(c).OrgID, id, c.FormValue("reason")); err != nil {
		return h.versionFormError(c, id, err, func(m *views.ModelVersionView, fields map[string]string) {
			m.Errors = map[string]string{"override_reason": fields["reason"]}
		})
	}
	h.Sessions.Flash(c, "ok", "The gate is overridden for this version; the reason stays on it.")
	return redirect(c, "/models/versions/"+id.String())
}

// ModelStatus changes a version's status (archiving it) from its page.
func (h *Handlers) ModelStatus(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	status := c.FormValue("status")
	v, err := h.Models.Update(ctx(c), actor(c), CallerOf(c).OrgID, id, models.Patch{Status: &status})
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", fmt.Sprintf("%s %s is now %s.", v.Name, v.Version, views.Label(v.Status)))
	return redirect(c, "/models/versions/"+id.String())
}

// versionFormError shows a refused form on the version page with the
// user's input kept and the messages beside the fields; other errors go
// the usual way.
func (h *Handlers) versionFormError(c echo.Context, id uuid.UUID, err error, keep func(*views.ModelVersionView, map[string]string)) error {
	var invalid *errs.Invalid
	var conflict *errs.Conflict
	var fields map[string]string
	switch {
	case errors.As(err, &invalid):
		fields = invalid.ByField()
	case errors.As(err, &conflict):
		fields = map[string]string{"alias": conflict.Message}
	default:
		return err
	}
	m, verr := h.modelVersionView(c, id)
	if verr != nil {
		return verr
	}
	keep(&m, fields)
	return h.renderModelVersion(c, http.StatusUnprocessableEntity, m)
}

// Targets is the serving targets page.
func (h *Handlers) Targets(c echo.Context) error {
	return h.renderTargets(c, http.StatusOK, views.TargetForm{Kind: serving.KindVLLM, Grace: "300"}, nil)
}

func (h *Handlers) renderTargets(c echo.Context, status int, form views.TargetForm, problems map[string]string) error {
	targets, err := h.Serving.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	m := views.TargetsView{Form: form, Errors: problems}
	for _, t := range targets {
		m.Targets = append(m.Targets, views.TargetRow{Name: t.Name, Kind: t.Kind, BaseURL: t.BaseURL, HasKey: t.HasAPIKey,
			Grace: views.Count(int(t.UnloadGrace), "second", "seconds"), CreatedAt: views.When(t.CreatedAt)})
	}
	return render(c, status, views.TargetsPage(h.page(c, "Serving targets", "models"), m))
}

// TargetCreate adds a serving target from the form.
func (h *Handlers) TargetCreate(c echo.Context) error {
	form := views.TargetForm{Name: c.FormValue("name"), Kind: c.FormValue("kind"), BaseURL: c.FormValue("base_url"), Grace: c.FormValue("unload_grace_seconds")}
	in := serving.NewTarget{Name: form.Name, Kind: form.Kind, BaseURL: form.BaseURL, APIKey: c.FormValue("api_key")}
	if form.Grace != "" {
		n, err := strconv.Atoi(form.Grace)
		if err != nil {
			return h.renderTargets(c, http.StatusUnprocessableEntity, form, map[string]string{"unload_grace_seconds": "must be a whole number of seconds"})
		}
		in.UnloadGrace = &n
	}
	t, err := h.Serving.Create(ctx(c), actor(c), CallerOf(c).OrgID, in)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderTargets(c, http.StatusUnprocessableEntity, form, invalid.ByField())
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Added the serving target "+t.Name+".")
	return redirect(c, "/models/targets")
}

// targetHealth is the named serving targets' health, as their last checks
// found it, for a page.
func (h *Handlers) targetHealth(c echo.Context, names []string) ([]views.TargetHealthRow, error) {
	health, err := h.Models.Health(ctx(c), CallerOf(c).OrgID, names)
	if err != nil {
		return nil, err
	}
	out := make([]views.TargetHealthRow, 0, len(health))
	for _, t := range health {
		r := views.TargetHealthRow{Target: t.Target, Checked: "—"}
		if t.Checked != nil {
			r.Checked = views.When(*t.Checked)
		}
		switch {
		case !t.Polled:
			r.State, r.Detail = "not_polled", "Targets of this kind serve what they were given; Curate does not ask them."
		case t.Checked == nil:
			r.State, r.Detail = "never_checked", "The serving check has not asked it yet."
		case !t.Healthy:
			r.State, r.Detail = "unreachable", t.Error
		case t.Stale:
			r.State, r.Detail = "stale", "Its last answer is older than the check's interval: aliases on it answer 503 until it is asked again."
		default:
			r.State, r.Detail = "healthy", views.Count(len(t.Models), "model listed", "models listed")+": "+strings.Join(t.Models, ", ")
		}
		out = append(out, r)
	}
	return out, nil
}
