package handlers

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
)

// fineTuneObject is a job in the API's shape. Money is in US dollars.
type fineTuneObject struct {
	ID               string                `json:"id"`
	Status           string                `json:"status"`
	ProviderState    string                `json:"provider_state,omitempty"`
	Provider         string                `json:"provider"`
	BaseModel        string                `json:"base_model"`
	Method           string                `json:"method"`
	DatasetVersionID string                `json:"dataset_version_id"`
	Dataset          string                `json:"dataset"`
	ExportFormat     string                `json:"export_format"`
	Hyperparameters  json.RawMessage       `json:"hyperparameters"`
	Local            json.RawMessage       `json:"local,omitempty"` // a local job's own settings
	Suffix           string                `json:"suffix,omitempty"`
	Seed             *int64                `json:"seed,omitempty"`
	ProviderJobID    string                `json:"provider_job_id,omitempty"`
	FineTunedModel   string                `json:"fine_tuned_model,omitempty"`
	Error            string                `json:"error,omitempty"`
	Progress         progressObject        `json:"progress"`
	EstimatedTokens  int64                 `json:"estimated_tokens"`
	EstimatedCost    float64               `json:"estimated_cost_usd"`
	TrainedTokens    int64                 `json:"trained_tokens"`
	ActualCost       *float64              `json:"actual_cost_usd,omitempty"`
	PriceDate        string                `json:"price_date"`
	CancelRequested  bool                  `json:"cancel_requested"`
	CreatedBy        string                `json:"created_by"`
	CreatedAt        time.Time             `json:"created_at"`
	StartedAt        *time.Time            `json:"started_at,omitempty"`
	CompletedAt      *time.Time            `json:"completed_at,omitempty"`
	Metrics          []provider.StepMetric `json:"metrics,omitempty"`
	Checkpoints      []checkpointObject    `json:"checkpoints,omitempty"`
}

type progressObject struct {
	Step        int32    `json:"step"`
	TotalSteps  int32    `json:"total_steps"`
	Epoch       int32    `json:"epoch"`
	TotalEpochs int32    `json:"total_epochs"`
	Fraction    *float64 `json:"fraction,omitempty"` // 0 to 1, when known
}

type checkpointObject struct {
	Step    int32           `json:"step"`
	Model   string          `json:"model"`
	At      time.Time       `json:"at"`
	Metrics json.RawMessage `json:"metrics"`
}

func toFineTuneObject(j db.FineTuningJob) fineTuneObject {
	o := fineTuneObject{ID: j.ID.String(), Status: string(j.Status), ProviderState: j.ProviderState, Provider: j.Provider,
		BaseModel: j.BaseModel, Method: j.Method, DatasetVersionID: j.DatasetVersionID.String(), Dataset: j.DatasetLabel,
		ExportFormat: j.ExportFormat, Hyperparameters: j.Hyperparameters, Local: localSettings(j), Suffix: j.Suffix, ProviderJobID: j.ProviderJobID,
		FineTunedModel: j.FineTunedModel, Error: j.ErrorMessage, EstimatedTokens: j.EstimatedTokens,
		EstimatedCost: pricing.Micros(j.EstimatedCost).Dollars(), TrainedTokens: j.TrainedTokens, PriceDate: j.PriceDate,
		CancelRequested: j.CancelRequestedAt != nil, CreatedBy: j.CreatedByLabel, CreatedAt: j.CreatedAt,
		StartedAt: j.StartedAt, CompletedAt: j.CompletedAt,
		Progress: progressObject{Step: j.Step, TotalSteps: j.TotalSteps, Epoch: j.Epoch, TotalEpochs: j.TotalEpochs}}
	if j.Seed.Valid {
		o.Seed = &j.Seed.Int64
	}
	if j.ActualCost.Valid {
		d := pricing.Micros(j.ActualCost.Int64).Dollars()
		o.ActualCost = &d
	}
	if f, ok := finetune.Progress(j); ok {
		o.Progress.Fraction = &f
	}
	return o
}

// localSettings are a local job's settings; nil for other providers.
func localSettings(j db.FineTuningJob) json.RawMessage {
	if j.Provider != local.Name || len(j.LocalSettings) == 0 {
		return nil
	}
	return j.LocalSettings
}

// APIFineTuneLaunch launches a job: 201 with it, 422 naming each bad
// field, or 422 on "budget" with the figures when it would overspend.
func (h *Handlers) APIFineTuneLaunch(c echo.Context) error {
	var body struct {
		DatasetVersionID string                   `json:"dataset_version_id"`
		Provider         string                   `json:"provider"`
		BaseModel        string                   `json:"base_model"`
		Method           string                   `json:"method"`
		Hyperparameters  provider.Hyperparameters `json:"hyperparameters"`
		Suffix           string                   `json:"suffix"`
		Seed             *int64                   `json:"seed"`
		Local            *local.Settings          `json:"local"` // the local provider's own settings
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	req := finetune.Request{Provider: body.Provider, BaseModel: body.BaseModel, Method: provider.Method(body.Method),
		Hyper: body.Hyperparameters, Suffix: body.Suffix, Seed: body.Seed, Local: body.Local}
	if body.DatasetVersionID != "" {
		if err := req.VersionID.UnmarshalText([]byte(body.DatasetVersionID)); err != nil {
			return errs.InvalidField("dataset_version_id", "must be a dataset version id")
		}
	}
	job, _, err := h.FineTune.Launch(ctx(c), actor(c), CallerOf(c).OrgID, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toFineTuneObject(job))
}

// APIFineTuneList lists jobs, newest first, with filters and a cursor.
func (h *Handlers) APIFineTuneList(c echo.Context) error {
	q := c.QueryParams()
	f := finetune.Filter{Status: q.Get("status"), Provider: q.Get("provider"), BaseModel: q.Get("base_model")}
	if err := f.Check(h.FineTune.Providers); err != nil {
		return err
	}
	limit, cursor, err := listPage(q, cursorIn(finetune.ListName))
	if err != nil {
		return err
	}
	page, err := h.FineTune.List(ctx(c), CallerOf(c).OrgID, f, cursor, limit)
	if err != nil {
		return err
	}
	out := make([]fineTuneObject, len(page.Jobs))
	for i, j := range page.Jobs {
		out[i] = toFineTuneObject(j)
	}
	return listJSON(c, finetune.ListName, out, page.Next)
}

// APIFineTuneGet returns a job with its status, progress, metrics and
// checkpoints.
func (h *Handlers) APIFineTuneGet(c echo.Context) error {
	d, err := h.fineTuneDetail(c)
	if err != nil {
		return err
	}
	o := toFineTuneObject(d.Job)
	o.Metrics = []provider.StepMetric{}
	for _, m := range d.Metrics {
		sm := provider.StepMetric{Step: int(m.Step), Epoch: int(m.Epoch)}
		if m.TrainLoss.Valid {
			sm.TrainLoss = &m.TrainLoss.Float64
		}
		if m.TrainAccuracy.Valid {
			sm.TrainAccuracy = &m.TrainAccuracy.Float64
		}
		if m.ValidLoss.Valid {
			sm.ValidLoss = &m.ValidLoss.Float64
		}
		if m.ValidMeanTokenAccuracy.Valid {
			sm.ValidMeanTokenAccuracy = &m.ValidMeanTokenAccuracy.Float64
		}
		o.Metrics = append(o.Metrics, sm)
	}
	for _, cp := range d.Checkpoints {
		o.Checkpoints = append(o.Checkpoints, checkpointObject{Step: cp.Step, Model: cp.Model, At: cp.At, Metrics: cp.Metrics})
	}
	return c.JSON(http.StatusOK, o)
}

// APIFineTuneCancel asks the provider to stop the job: 202 with the job,
// or 409 when it has already ended (and nothing is charged).
func (h *Handlers) APIFineTuneCancel(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	job, err := h.FineTune.Cancel(ctx(c), actor(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, toFineTuneObject(job))
}
