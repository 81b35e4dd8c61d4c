package finetune

import (
	"encoding/json"
	"time"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
)

// Object is a job as the API shows it, in lists and alone. Money is in US
// dollars; hyperparameters are named as the job's provider names them.
type Object struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	ProviderState string `json:"provider_state,omitempty"`
	Provider      string `json:"provider"`
	BaseModel     string `json:"base_model"`
	// RequestedBaseModel, in a launch's answer, is the alias the request
	// named, which BaseModel is the provider's current snapshot of.
	RequestedBaseModel string                    `json:"requested_base_model,omitempty"`
	Name               string                    `json:"name"`
	Method             string                    `json:"method"`
	DatasetVersionID   string                    `json:"dataset_version_id"`
	Dataset            string                    `json:"dataset"`
	ExportFormat       string                    `json:"export_format"`
	Hyperparameters    map[string]provider.Value `json:"hyperparameters"`
	Local              json.RawMessage           `json:"local,omitempty"` // a local job's own settings
	Suffix             string                    `json:"suffix,omitempty"`
	RegisteredModel    string                    `json:"registered_model,omitempty"`
	Seed               *int64                    `json:"seed,omitempty"`
	ProviderJobID      string                    `json:"provider_job_id,omitempty"`
	FineTunedModel     string                    `json:"fine_tuned_model,omitempty"`
	Error              string                    `json:"error,omitempty"`
	Progress           ProgressObject            `json:"progress"`
	EstimatedTokens    int64                     `json:"estimated_tokens"`
	EstimatedCost      float64                   `json:"estimated_cost_usd"`
	TrainedTokens      int64                     `json:"trained_tokens"`
	ActualCost         *float64                  `json:"actual_cost_usd,omitempty"`
	PriceDate          string                    `json:"price_date"`
	Price              *PriceObject              `json:"price,omitempty"` // the price row the estimate used; absent for free jobs
	CancelRequested    bool                      `json:"cancel_requested"`
	CreatedBy          string                    `json:"created_by"`
	CreatedAt          time.Time                 `json:"created_at"`
	StartedAt          *time.Time                `json:"started_at,omitempty"`
	CompletedAt        *time.Time                `json:"completed_at,omitempty"`
	// Metrics and Checkpoints come with one job (DetailObject), not in
	// lists.
	Metrics     []provider.StepMetric `json:"metrics,omitempty"`
	Checkpoints []CheckpointObject    `json:"checkpoints,omitempty"`
}

// ProgressObject is how far a job has gone.
type ProgressObject struct {
	Step        int32    `json:"step"`
	TotalSteps  int32    `json:"total_steps"`
	Epoch       int32    `json:"epoch"`
	TotalEpochs int32    `json:"total_epochs"`
	Fraction    *float64 `json:"fraction,omitempty"` // 0 to 1, when known
}

// PriceObject names the organisation's price row a job was estimated
// with, and what it said.
type PriceObject struct {
	ID            string  `json:"id"`
	USDPerMillion float64 `json:"usd_per_million_tokens"`
	EffectiveDate string  `json:"effective_date"`
}

// CheckpointObject is a checkpoint the provider kept.
type CheckpointObject struct {
	Step    int32           `json:"step"`
	Model   string          `json:"model"`
	At      time.Time       `json:"at"`
	Metrics json.RawMessage `json:"metrics"`
}

// ToObject shapes a job for the API, naming its hyperparameters with sp,
// its provider's spelling.
func ToObject(j db.FineTuningJob, sp provider.Spelling) Object {
	o := Object{ID: j.ID.String(), Name: j.Name, Status: string(j.Status), ProviderState: j.ProviderState, Provider: j.Provider,
		BaseModel: j.BaseModel, Method: j.Method, DatasetVersionID: j.DatasetVersionID.String(), Dataset: j.DatasetLabel,
		ExportFormat: j.ExportFormat, Local: LocalSettings(j), Suffix: j.Suffix, RegisteredModel: j.RegisteredModel, ProviderJobID: j.ProviderJobID,
		FineTunedModel: j.FineTunedModel, Error: j.ErrorMessage, EstimatedTokens: j.EstimatedTokens,
		EstimatedCost: pricing.Micros(j.EstimatedCost).Dollars(), TrainedTokens: j.TrainedTokens, PriceDate: j.PriceDate,
		CancelRequested: j.CancelRequestedAt != nil, CreatedBy: j.CreatedByLabel, CreatedAt: j.CreatedAt,
		StartedAt: j.StartedAt, CompletedAt: j.CompletedAt,
		Progress: ProgressObject{Step: j.Step, TotalSteps: j.TotalSteps, Epoch: j.Epoch, TotalEpochs: j.TotalEpochs}}
	// Stored under Curate's names by Launch, so it always reads.
	var hyper provider.Hyperparameters
	_ = json.Unmarshal(j.Hyperparameters, &hyper)
	o.Hyperparameters = hyper.Spelled(sp)
	if j.Seed.Valid {
		o.Seed = &j.Seed.Int64
	}
	if j.ActualCost.Valid {
		d := pricing.Micros(j.ActualCost.Int64).Dollars()
		o.ActualCost = &d
	}
	if j.PriceID.Valid {
		o.Price = &PriceObject{ID: j.PriceID.UUID.String(), USDPerMillion: pricing.Micros(j.PricePerMillion).Dollars(), EffectiveDate: j.PriceDate}
	}
	if f, ok := Progress(j); ok {
		o.Progress.Fraction = &f
	}
	return o
}

// DetailObject is one job with its metrics and checkpoints.
func DetailObject(d Detail, sp provider.Spelling) Object {
	o := ToObject(d.Job, sp)
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
		o.Checkpoints = append(o.Checkpoints, CheckpointObject{Step: cp.Step, Model: cp.Model, At: cp.At, Metrics: cp.Metrics})
	}
	return o
}

// LocalSettings are a local job's own settings; nil for other providers.
func LocalSettings(j db.FineTuningJob) json.RawMessage {
	if j.Provider != local.Name || len(j.LocalSettings) == 0 {
		return nil
	}
	return j.LocalSettings
}
