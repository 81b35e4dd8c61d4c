package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/views"
)

// FineTuneJobs is the dashboard: budget, filters and the jobs list.
func (h *Handlers) FineTuneJobs(c echo.Context) error {
	caller := CallerOf(c)
	q := c.QueryParams()
	f, err := finetune.ParseFilter(q, h.FineTune.Providers)
	if err != nil {
		return err
	}
	cursor, err := keyset.Parse(finetune.ListName, q.Get("cursor"))
	if err != nil {
		return err
	}
	page, err := h.FineTune.List(ctx(c), caller.OrgID, f, cursor, 50)
	if err != nil {
		return err
	}
	b, err := h.FineTune.Budget(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	m := views.FineTuneListView{IsAdmin: caller.Role.AtLeast(auth.Admin), Budget: b.Monthly.String(), Spent: b.Spent.String(),
		Left: b.Left().String(), Status: f.Status, Provider: f.Provider, Statuses: finetune.Statuses, Providers: h.providerOptions()}
	for _, j := range page.Jobs {
		pr, known := finetune.Progress(j)
		r := views.FineTuneRow{ID: j.ID.String(), Name: jobName(j), Provider: h.providerLabel(j.Provider), BaseModel: j.BaseModel, Dataset: j.DatasetLabel,
			Status: string(j.Status), Progress: pr, ProgressKnown: known, EstimatedCost: pricing.Micros(j.EstimatedCost).String(),
			CreatedBy: j.CreatedByLabel, CreatedAt: views.When(j.CreatedAt)}
		if j.ActualCost.Valid {
			r.ActualCost = pricing.Micros(j.ActualCost.Int64).String()
		}
		m.Rows = append(m.Rows, r)
	}
	if page.Next != nil {
		next := f.Values()
		next.Set("cursor", page.Next.Encode(finetune.ListName))
		m.NextURL = "/fine-tuning?" + next.Encode()
	}
	if m.IsAdmin {
		ws, err := h.FineTune.GPUWorkers(ctx(c))
		if err != nil {
			return err
		}
		m.Workers, m.WorkersLiveFor = workerViews(ws), liveForText
	}
	return render(c, http.StatusOK, views.FineTuneListPage(h.page(c, "Fine-tuning", "finetune"), m))
}

func (h *Handlers) providerOptions() []views.Option {
	var out []views.Option
	for _, name := range h.FineTune.Providers.Names() {
		out = append(out, views.Option{Value: name, Label: h.FineTune.Providers[name].Label})
	}
	return out
}

// launchProviders are the providers the launch form offers, each that
// cannot take a job here disabled with the reason.
func (h *Handlers) launchProviders(c echo.Context) []views.FineTuneProviderOption {
	unavailable := h.FineTune.Unavailable(ctx(c))
	var out []views.FineTuneProviderOption
	for _, o := range h.providerOptions() {
		out = append(out, views.FineTuneProviderOption{Value: o.Value, Label: o.Label, Unavailable: unavailable[o.Value],
			DefaultModel: h.FineTune.Providers[o.Value].DefaultModel})
	}
	return out
}

// jobName is a job's readable name; jobs launched before names were
// stored go by their dataset version and the start of their id.
func jobName(j db.FineTuningJob) string {
	if j.Name != "" {
		return j.Name
	}
	return j.DatasetLabel + " · " + j.ID.String()[:8]
}

func (h *Handlers) providerLabel(name string) string {
	if e, ok := h.FineTune.Providers[name]; ok {
		return e.Label
	}
	return name
}

// launchFields are the form fields a launch reads, for re-rendering.
var launchFields = []string{"dataset_version_id", "provider", "base_model", "method", "hyperparameters.epochs",
	"hyperparameters.batch_size", "hyperparameters.learning_rate_multiplier", "hyperparameters.beta", "suffix", "registered_model", "seed"}

// parseLaunchForm reads the launch form. Fields that cannot be read are
// reported in bad; the rest of the request is still filled in, so the
// estimate can check it too.
func parseLaunchForm(c echo.Context) (finetune.Request, map[string]string, *errs.Invalid) {
	values := map[string]string{}
	for _, f := range append(launchFields, localFieldNames()...) {
		values[f] = strings.TrimSpace(c.FormValue(f))
	}
	return parseLaunchValues(values)
}

// parseLaunchValues reads the launch form's values.
func parseLaunchValues(values map[string]string) (finetune.Request, map[string]string, *errs.Invalid) {
	bad := &errs.Invalid{}
	req := finetune.Request{Provider: values["provider"], BaseModel: values["base_model"], Method: provider.Method(values["method"]), Suffix: values["suffix"],
		RegisteredModel: values["registered_model"]}
	if v := values["dataset_version_id"]; v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			bad.Add("dataset_version_id", "choose a dataset version from the list")
		}
		req.VersionID = id
	}
	for _, p := range []struct {
		field string
		into  *provider.Value
	}{
		{provider.FieldEpochs, &req.Hyper.Epochs},
		{provider.FieldBatchSize, &req.Hyper.BatchSize},
		{provider.FieldLearningRateMultiplier, &req.Hyper.LearningRateMultiplier},
		{provider.FieldBeta, &req.Hyper.Beta},
	} {
		v, err := provider.ParseValue(values[p.field])
		if err != nil {
			bad.Add(p.field, "%v", err)
		}
		*p.into = v
	}
	if s := values["seed"]; s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			bad.Add("seed", "must be a whole number, or empty")
		} else {
			req.Seed = &n
		}
	}
	if req.Provider == local.Name {
		// The local settings' section applies to local jobs only.
		req.Local = parseLocalForm(values, bad)
	}
	return req, values, bad
}

// mergeInvalid adds the messages of err, when it is invalid input, to
// bad; any other error is returned.
func mergeInvalid(bad *errs.Invalid, err error) error {
	var inv *errs.Invalid
	if errors.As(err, &inv) {
		have := bad.ByField()
		for _, fe := range inv.Errors {
			if _, dup := have[fe.Field]; !dup {
				bad.Errors = append(bad.Errors, fe)
			}
		}
		return nil
	}
	return err
}

func estimateView(est finetune.Estimate, bad *errs.Invalid) views.FineTuneEstimateView {
	fields := append(append([]string(nil), views.FineTuneFields...), localFieldNames()...)
	v := views.FineTuneEstimateView{Errors: bad.ByField(), Fields: fields, Missing: missing(bad, fields)}
	// Epochs are worked out only once the request has passed its checks:
	// without them there is nothing to show but what is missing.
	if est.Epochs == 0 {
		return v
	}
	v.Ready, v.Examples, v.PerEpoch, v.Epochs, v.EpochsAuto, v.Tokens = true, est.TrainExamples, est.TokensPerEpoch, est.Epochs, est.EpochsAuto, est.TrainedTokens
	v.AllExamples, v.BaseModel, v.Format = est.Version.Examples, est.Request.BaseModel, string(est.Format)
	v.Price, v.PriceModel, v.PriceDate, v.PriceBy, v.PriceID = fmt.Sprintf("$%g", est.Price.PerMillion), est.Price.BaseModel+" at "+est.Price.Provider, est.Price.Date, est.Price.SetBy, est.Price.ID.String()
	v.Cost, v.Left, v.Budget, v.OverBudget, v.Free = est.Cost.String(), est.Budget.Left().String(), est.Budget.Monthly.String(), !est.Fits(), est.Free
	return v
}

// fieldNames are the launch form's fields as its labels name them.
var fieldNames = map[string]string{
	"dataset_version_id": "Dataset version", "dataset_id": "Dataset", "provider": "Provider", "base_model": "Base model",
	"method": "Method", provider.FieldEpochs: "Epochs", provider.FieldBatchSize: "Batch size",
	provider.FieldLearningRateMultiplier: "Learning rate multiplier", provider.FieldBeta: "Beta", "suffix": "Suffix",
	"registered_model": "Register as",
	"seed":             "Seed", "budget": "Budget", "local": "Local trainer settings",
}

// missing turns the refusals into sentences for the estimate panel, in
// the form's order: "Choose a frozen dataset version", "Epochs must be
// from 1 to 50".
func missing(bad *errs.Invalid, fields []string) []string {
	by := bad.ByField()
	var out []string
	sentence := func(field, msg string) string {
		name, ok := fieldNames[field]
		if !ok {
			name = views.Label(strings.TrimPrefix(field, "local."))
		}
		switch {
		case strings.HasPrefix(msg, "choose "):
			return strings.ToUpper(msg[:1]) + msg[1:] + "."
		case strings.HasPrefix(msg, "must ") || strings.HasPrefix(msg, "is ") || strings.HasPrefix(msg, "applies "):
			return name + " " + msg + "."
		}
		return name + ": " + msg + "."
	}
	for _, f := range fields {
		if msg, ok := by[f]; ok {
			out = append(out, sentence(f, msg))
			delete(by, f)
		}
	}
	for _, fe := range bad.Errors {
		if msg, ok := by[fe.Field]; ok {
			out = append(out, sentence(fe.Field, msg))
			delete(by, fe.Field)
		}
	}
	return out
}

// estimate checks the form's request and views its estimate, with the
// form's own refusals (bad) beside the estimate's.
func (h *Handlers) estimate(c echo.Context, req finetune.Request, bad *errs.Invalid) (views.FineTuneEstimateView, error) {
	est, err := h.FineTune.Estimate(ctx(c), CallerOf(c).OrgID, req)
	if err := mergeInvalid(bad, err); err != nil {
		return views.FineTuneEstimateView{}, err
	}
	return estimateView(est, bad), nil
}

// FineTuneNew shows the launch form, with the estimate of what it holds
// so far: at first, what is still missing. The base model starts as the
// one a launch naming none would train (the dataset's, or else the
// provider's default), so the estimate is complete once a version is
// chosen; a version in the link (from its dataset's page) is chosen, with
// the method its examples take.
func (h *Handlers) FineTuneNew(c echo.Context) error {
	providers := h.launchProviders(c)
	values := map[string]string{"provider": firstAvailable(providers), "method": "supervised"}
	for _, f := range append(launchFields, localFieldNames()...) {
		if v := c.QueryParam(f); v != "" {
			values[f] = v
		}
	}
	orgID := CallerOf(c).OrgID
	estimate := func() (finetune.Estimate, *errs.Invalid, error) {
		req, _, bad := parseLaunchValues(values)
		est, err := h.FineTune.Estimate(ctx(c), orgID, req)
		return est, bad, mergeInvalid(bad, err)
	}
	est, bad, err := estimate()
	if err != nil {
		return err
	}
	// Preference pairs train by DPO, unless the link asks otherwise.
	if c.QueryParam("method") == "" && est.Version.Kind == export.KindPreference {
		values["method"] = string(provider.DPO)
		if est, bad, err = estimate(); err != nil {
			return err
		}
	}
	if values["base_model"] == "" {
		values["base_model"] = est.Request.BaseModel
	}
	return h.renderLaunchForm(c, http.StatusOK, providers, values, map[string]string{}, estimateView(est, bad))
}

// firstAvailable is the provider the form starts on: OpenAI when it can
// take a job, or else the first that can.
func firstAvailable(ps []views.FineTuneProviderOption) string {
	first := ""
	for _, p := range ps {
		if p.Unavailable != "" {
			continue
		}
		if p.Value == "openai" {
			return p.Value
		}
		if first == "" {
			first = p.Value
		}
	}
	if first == "" {
		return "openai"
	}
	return first
}

func (h *Handlers) renderLaunchForm(c echo.Context, status int, providers []views.FineTuneProviderOption, values, errors map[string]string, est views.FineTuneEstimateView) error {
	caller := CallerOf(c)
	m := views.FineTuneFormView{Providers: providers, Values: values, Errors: errors, Estimate: est,
		Device: h.localDevice(ctx(c))}
	for _, in := range localInputs(&local.Settings{}, map[string]float64{}) {
		m.Local = append(m.Local, in.FineTuneLocalInput)
	}
	versions, err := h.FineTune.Versions(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	for _, v := range versions {
		label := fmt.Sprintf("%s (%s, %s)", v.Label, views.Label(string(v.Kind)), views.Count(v.Examples, "example", "examples"))
		if !v.Valid {
			label += " — failed validation"
		}
		m.Versions = append(m.Versions, views.Option{Value: v.ID.String(), Label: label})
		if v.BaseModel != "" {
			if m.VersionModels == nil {
				m.VersionModels = map[string]string{}
			}
			m.VersionModels[v.ID.String()] = v.BaseModel
		}
	}
	prices, err := h.FineTune.PriceTable(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	for _, p := range prices.Prices {
		m.Models = append(m.Models, p.BaseModel)
	}
	return render(c, status, views.FineTuneNewPage(h.page(c, "Launch fine-tuning", "finetune"), m))
}

// FineTuneEstimate answers the form as it is typed: the estimate, or what
// is missing, and the message under each field.
func (h *Handlers) FineTuneEstimate(c echo.Context) error {
	req, _, bad := parseLaunchForm(c)
	est, err := h.estimate(c, req, bad)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.FineTuneEstimate(est, true))
}

// FineTuneJobsOpen answers the address the launch form once posted to,
// opened or reloaded: the list of jobs.
func (h *Handlers) FineTuneJobsOpen(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, "/fine-tuning")
}

// FineTuneLaunch launches from the form; on refusal the form comes back
// as typed, with the messages beside the fields and the estimate of what
// was typed (or what is missing), never an empty one.
func (h *Handlers) FineTuneLaunch(c echo.Context) error {
	req, values, bad := parseLaunchForm(c)
	var job db.FineTuningJob
	var est finetune.Estimate
	var err error
	if !bad.Has() {
		job, est, err = h.FineTune.Launch(ctx(c), actor(c), CallerOf(c).OrgID, req)
	} else {
		// Not launched; the estimate's checks still name every other bad field.
		est, err = h.FineTune.Estimate(ctx(c), CallerOf(c).OrgID, req)
	}
	if err := mergeInvalid(bad, err); err != nil {
		return err
	}
	if bad.Has() {
		return h.renderLaunchForm(c, http.StatusUnprocessableEntity, h.launchProviders(c), values, bad.ByField(), estimateView(est, bad))
	}
	if est.Free {
		h.Sessions.Flash(c, "ok", fmt.Sprintf("Local training job launched on %s (no charge).", views.Count(est.TrainExamples, "example", "examples")))
	} else {
		h.Sessions.Flash(c, "ok", fmt.Sprintf("Fine-tuning job launched: an estimated %s for %s.", est.Cost, views.Count(est.TrainedTokens, "token", "tokens")))
	}
	return redirect(c, "/fine-tuning/jobs/"+job.ID.String())
}

// FineTuneJob is one job's page.
func (h *Handlers) FineTuneJob(c echo.Context) error {
	d, err := h.fineTuneDetail(c)
	if err != nil {
		return err
	}
	j := d.Job
	m := views.FineTuneJobView{ID: j.ID.String(), Name: jobName(j), Live: h.liveView(ctx(c), d), Local: settingsRows(finetune.LocalSettings(j)), Provider: h.providerLabel(j.Provider), BaseModel: j.BaseModel,
		Method: j.Method, Dataset: j.DatasetLabel, DatasetVersion: j.DatasetVersionID.String(), Format: j.ExportFormat,
		Suffix: j.Suffix, TrainExamples: int(j.TrainExamples),
		CreatedBy: j.CreatedByLabel, CreatedAt: views.When(j.CreatedAt),
		CanCancel: !finetune.Terminal(j.Status) && j.CancelRequestedAt == nil && CallerOf(c).Role.AtLeast(auth.Admin)}
	if d.DatasetID != uuid.Nil {
		m.DatasetURL = "/datasets/" + d.DatasetID.String()
	}
	if j.Seed.Valid {
		m.Seed = strconv.FormatInt(j.Seed.Int64, 10)
	}
	if !h.FineTune.Providers[j.Provider].Free && j.PriceDate != "" {
		m.Price = fmt.Sprintf("$%g per million tokens, the price effective %s", pricing.Micros(j.PricePerMillion).Dollars(), j.PriceDate)
	}
	var hyper provider.Hyperparameters
	if err := json.Unmarshal(j.Hyperparameters, &hyper); err != nil {
		return err
	}
	for _, nv := range hyper.Each() {
		if nv.Field == provider.FieldBeta && j.Method != string(provider.DPO) {
			continue
		}
		m.Hyperparameters = append(m.Hyperparameters, views.Option{Label: strings.TrimPrefix(nv.Field, "hyperparameters."), Value: nv.Value.String()})
	}
	m.Loop = h.loopOrigin(c, "fine_tuning_job_id", j.ID.String())
	return render(c, http.StatusOK, views.FineTuneJobPage(h.page(c, jobName(j), "finetune"), m))
}

// FineTuneJobLive is the refreshing part of the job page.
func (h *Handlers) FineTuneJobLive(c echo.Context) error {
	d, err := h.fineTuneDetail(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.FineTuneLiveUpdate(h.liveView(ctx(c), d)))
}

func (h *Handlers) fineTuneDetail(c echo.Context) (finetune.Detail, error) {
	id, err := pathID(c)
	if err != nil {
		return finetune.Detail{}, err
	}
	return h.FineTune.Get(ctx(c), CallerOf(c).OrgID, id)
}

// liveView is the refreshing part of a job page; a local job's adds what
// its run's metrics.jsonl says: IRS iterations, a reward model's
// evaluation, GRPO and PPO steps, and why it stopped early.
func (h *Handlers) liveView(ctx context.Context, d finetune.Detail) views.FineTuneLiveView {
	v := liveView(d)
	v.Cost = h.costView(d.Job)
	if d.Job.Provider != local.Name {
		return v
	}
	lines, err := h.FineTune.RunMetrics(ctx, d.Job)
	if err != nil {
		h.Log.Warn("reading a local run's metrics", "job", d.Job.ID, "err", err)
	}
	withOptim(&v, finetune.OptimSummary(lines))
	kept, hasKept := finetune.KeptBest(lines)
	withMarks(&v, finetune.Stops(lines), kept, hasKept)
	switch provider.Method(d.Job.Method) {
	case local.IRS:
		points, _ := finetune.IRSSummary(lines)
		c := irsChart(points)
		v.IRS = &c
	case local.Reward:
		r := rewardEvalView(finetune.RewardSummary(lines))
		v.RewardEval = &r
	case local.GRPO, local.PPO:
		steps, checks := finetune.PolicySummary(lines)
		p := policyView(d.Job.Method, steps, checks)
		v.Policy = &p
		rsteps, spend, err := h.RLAIF.Steps(ctx, d.Job.OrgID, d.Job.ID)
		if err != nil {
			h.Log.Warn("reading a run's RLAIF samples", "job", d.Job.ID, "err", err)
		} else if spend.Samples > 0 {
			r := rlaifView(rsteps, spend)
			v.RLAIF = &r
		}
	}
	return v
}

func (h *Handlers) costView(j db.FineTuningJob) views.FineTuneCost {
	v := views.FineTuneCost{EstimatedTokens: j.EstimatedTokens, EstimatedEpochs: int(j.EstimatedEpochs), Epochs: int(j.TotalEpochs),
		TrainedTokens: j.TrainedTokens, EstimatedCost: pricing.Micros(j.EstimatedCost).String(), Gap: finetune.CostGap(j),
		Free: h.FineTune.Providers[j.Provider].Free}
	if j.ActualCost.Valid {
		v.ActualCost = pricing.Micros(j.ActualCost.Int64).String()
	}
	return v
}

func liveView(d finetune.Detail) views.FineTuneLiveView {
	j := d.Job
	pr, known := finetune.Progress(j)
	v := views.FineTuneLiveView{ID: j.ID.String(), Running: !finetune.Terminal(j.Status), Status: string(j.Status),
		ProviderState: j.ProviderState, ProviderJobID: j.ProviderJobID, Progress: pr, ProgressKnown: known,
		Model: j.FineTunedModel, Succeeded: j.Status == db.FinetuneStatusSucceeded, Error: j.ErrorMessage,
		CancelPending: j.CancelRequestedAt != nil && !finetune.Terminal(j.Status),
		StartedAt:     views.WhenPtr(j.StartedAt), CompletedAt: views.WhenPtr(j.CompletedAt)}
	if r := d.Registered; r != nil {
		v.Registered = &views.RegisteredLink{ID: r.ID.String(), Label: r.Name + " " + r.Version}
	}
	switch {
	case j.TotalSteps > 0:
		v.StepText = fmt.Sprintf("Step %d of %d", j.Step, j.TotalSteps)
	case j.Step > 0:
		v.StepText = fmt.Sprintf("Step %d", j.Step)
	}
	if j.TotalEpochs > 0 && j.Epoch > 0 {
		v.StepText += fmt.Sprintf(" · epoch %d of %d", j.Epoch, j.TotalEpochs)
	}
	opt := func(f float64, ok bool) *float64 {
		if !ok {
			return nil
		}
		return &f
	}
	for _, m := range d.Metrics {
		v.Metrics = append(v.Metrics, views.FineTuneMetricPoint{Step: int(m.Step), TrainLoss: num(m.TrainLoss.Float64, m.TrainLoss.Valid),
			TrainAcc: num(m.TrainAccuracy.Float64, m.TrainAccuracy.Valid), ValidLoss: num(m.ValidLoss.Float64, m.ValidLoss.Valid),
			ValidAcc: num(m.ValidMeanTokenAccuracy.Float64, m.ValidMeanTokenAccuracy.Valid)})
		if m.TrainLoss.Valid {
			v.LastLoss = num(m.TrainLoss.Float64, true)
		}
		if m.TrainLoss.Valid || m.ValidLoss.Valid {
			v.Loss.Step = append(v.Loss.Step, int(m.Step))
			v.Loss.Train = append(v.Loss.Train, opt(m.TrainLoss.Float64, m.TrainLoss.Valid))
			v.Loss.Valid = append(v.Loss.Valid, opt(m.ValidLoss.Float64, m.ValidLoss.Valid))
		}
	}
	for _, e := range d.Events {
		v.Events = append(v.Events, views.FineTuneEvent{At: views.When(e.At), Level: e.Level, Message: e.Message})
	}
	for _, c := range d.Checkpoints {
		var sm provider.StepMetric
		_ = json.Unmarshal(c.Metrics, &sm)
		v.Checkpoints = append(v.Checkpoints, views.FineTuneCheckpoint{Step: int(c.Step), Model: c.Model,
			TrainLoss: numPtr(sm.TrainLoss), ValidLoss: numPtr(sm.ValidLoss)})
	}
	return v
}

func num(f float64, ok bool) string {
	if !ok {
		return "—"
	}
	return strconv.FormatFloat(f, 'g', 4, 64)
}

func numPtr(f *float64) string {
	if f == nil {
		return "—"
	}
	return num(*f, true)
}

// FineTuneCancel asks for the job to be cancelled and wakes its worker.
func (h *Handlers) FineTuneCancel(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if _, err := h.FineTune.Cancel(ctx(c), actor(c), CallerOf(c).OrgID, id); err != nil {
		var conflict *errs.Conflict
		if errors.As(err, &conflict) {
			h.Sessions.Flash(c, "error", "Not cancelled: "+conflict.Message+".")
			return redirect(c, "/fine-tuning/jobs/"+id.String())
		}
		return err
	}
	h.Sessions.Flash(c, "ok", "Cancellation requested; the provider is told at once.")
	return redirect(c, "/fine-tuning/jobs/"+id.String())
}

// FineTuneSettings shows the budget and the organisation's price table.
func (h *Handlers) FineTuneSettings(c echo.Context) error {
	return h.renderSettings(c, http.StatusOK, nil, map[string]string{})
}

// renderSettings shows the settings; edit, when set, is a refused price
// table shown back as it was typed.
func (h *Handlers) renderSettings(c echo.Context, status int, edit *pricing.Edit, errors map[string]string) error {
	orgID := CallerOf(c).OrgID
	b, err := h.FineTune.Budget(ctx(c), orgID)
	if err != nil {
		return err
	}
	m := views.FineTuneSettingsView{Budget: strconv.FormatFloat(b.Monthly.Dollars(), 'f', 2, 64), Spent: b.Spent.String(),
		Date: time.Now().Format(time.DateOnly), Errors: errors}
	if v, ok := errors["monthly_budget"]; ok && v != "" {
		m.Budget = c.FormValue("monthly_budget")
	}
	if edit != nil {
		m.Date = edit.Date
		for _, p := range edit.Prices {
			m.Prices = append(m.Prices, views.FineTunePriceRow{Provider: p.Provider, BaseModel: p.BaseModel, PerMillion: strconv.FormatFloat(p.PerMillion, 'f', -1, 64)})
		}
	} else {
		table, err := h.FineTune.PriceTable(ctx(c), orgID)
		if err != nil {
			return err
		}
		for _, p := range table.Prices {
			m.Prices = append(m.Prices, views.FineTunePriceRow{Provider: p.Provider, BaseModel: p.BaseModel, PerMillion: strconv.FormatFloat(p.PerMillion, 'f', -1, 64),
				Effective: p.Date, SetBy: p.SetBy, SetAt: views.When(p.SetAt)})
		}
	}
	m.Prices = append(m.Prices, views.FineTunePriceRow{})
	return render(c, status, views.FineTuneSettingsPage(h.page(c, "Fine-tuning budget and prices", "finetune"), m))
}

// FineTuneBudgetSave sets the organisation's monthly budget.
func (h *Handlers) FineTuneBudgetSave(c echo.Context) error {
	d, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(c.FormValue("monthly_budget")), "$"), 64)
	if err != nil || math.IsNaN(d) || math.IsInf(d, 0) {
		return h.renderSettings(c, http.StatusUnprocessableEntity, nil, map[string]string{"monthly_budget": "must be a number of dollars, e.g. 250 or 99.50"})
	}
	err = h.FineTune.SetBudget(ctx(c), actor(c), CallerOf(c).OrgID, pricing.Dollars(d))
	var inv *errs.Invalid
	if errors.As(err, &inv) {
		return h.renderSettings(c, http.StatusUnprocessableEntity, nil, inv.ByField())
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Monthly fine-tuning budget set to "+pricing.Dollars(d).String()+".")
	return redirect(c, "/fine-tuning/settings")
}

// FineTunePricesSave replaces the organisation's price table.
func (h *Handlers) FineTunePricesSave(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	providers, models, prices := form["provider"], form["base_model"], form["usd_per_million"]
	t := pricing.Edit{Date: strings.TrimSpace(form.Get("date"))}
	bad := map[string]string{}
	for i := range models {
		model := strings.TrimSpace(models[i])
		if model == "" {
			continue // a cleared row is removed
		}
		var prov, price string
		if i < len(providers) {
			prov = strings.TrimSpace(providers[i])
		}
		if i < len(prices) {
			price = strings.TrimSpace(prices[i])
		}
		n, err := strconv.ParseFloat(price, 64)
		if err != nil {
			bad["prices"] = fmt.Sprintf("the price of %s is not a number", model)
			continue
		}
		t.Prices = append(t.Prices, pricing.Price{Provider: prov, BaseModel: model, PerMillion: n})
	}
	var changes []pricing.Change
	if len(bad) == 0 {
		changes, err = h.FineTune.SetPrices(ctx(c), actor(c), CallerOf(c).OrgID, t)
		var inv *errs.Invalid
		if errors.As(err, &inv) {
			for _, fe := range inv.Errors {
				field := fe.Field
				if strings.HasPrefix(field, "prices") {
					field = "prices"
				}
				if bad[field] == "" {
					bad[field] = fe.Field + ": " + fe.Message
				}
			}
		} else if err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		return h.renderSettings(c, http.StatusUnprocessableEntity, &t, bad)
	}
	if len(changes) == 0 {
		h.Sessions.Flash(c, "ok", "No price changed.")
	} else {
		h.Sessions.Flash(c, "ok", fmt.Sprintf("Prices saved: %d changed, effective %s.", len(changes), t.Date))
	}
	return redirect(c, "/fine-tuning/settings")
}
