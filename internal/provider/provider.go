// Package provider defines how Curate drives a fine-tuning service (OpenAI,
// Amazon Bedrock, later a local GPU trainer) one step at a time.
//
// Each call is one step whose result the caller stores before taking the
// next, so a worker that dies half-way resumes instead of paying twice:
//
//	Upload -> WaitUploaded (repeat until ready) -> FindJob -> Create
//	       -> Poll (repeat until a terminal state) -> Metrics
//
// FindJob comes before Create after any crash: it looks for a job the
// provider already holds for the Curate job id and adopts it. Create itself
// is idempotent on the Curate job id as far as the provider allows.
//
// Nothing here sleeps: WaitUploaded and Poll answer at once and the caller
// decides when to ask again.
package provider

import (
	"context"
	"encoding/json"
	"time"
)

// Provider is one fine-tuning service.
type Provider interface {
	// Name is the provider's short name, e.g. "openai" or "bedrock".
	Name() string

	// Validate checks that the base model takes the method and that every
	// hyperparameter lies in the provider's documented range. It returns a
	// *ValidationError naming each bad field, or nil.
	Validate(method Method, baseModel string, h Hyperparameters) error

	// Upload puts the training (and optional validation) file where the
	// provider can read it. Uploading again for the same Curate job adopts
	// the earlier upload rather than storing a second copy.
	Upload(ctx context.Context, req UploadRequest) (UploadResult, error)

	// WaitUploaded reports whether the uploaded files are ready to train
	// on. It does not block; a file the provider refused is an error.
	WaitUploaded(ctx context.Context, files UploadResult) (ready bool, err error)

	// FindJob looks for a provider job created for this Curate job id,
	// newest first. found is false when there is none.
	FindJob(ctx context.Context, curateJobID string) (job Job, found bool, err error)

	// Create starts the fine-tuning job. It validates the request first.
	Create(ctx context.Context, req CreateRequest) (Job, error)

	// Poll reports the job's state, the events after the cursor and the
	// checkpoints made so far.
	Poll(ctx context.Context, providerJobID string, since EventCursor) (PollResult, error)

	// Metrics returns the per-step training metrics the provider has
	// published so far, in step order; empty before there are any.
	Metrics(ctx context.Context, providerJobID string) ([]StepMetric, error)

	// Cancel asks the provider to stop the job.
	Cancel(ctx context.Context, providerJobID string) error
}

// Method is the training method.
type Method string

// The training methods Curate offers.
const (
	Supervised Method = "supervised" // learn from example answers
	DPO        Method = "dpo"        // direct preference optimisation on chosen/rejected pairs
)

// UploadRequest names the exported files for one Curate fine-tuning job.
// Files are given by path, not as readers, so a retried request can read
// them again from the start.
type UploadRequest struct {
	CurateJobID string
	TrainPath   string
	ValidPath   string // optional
	Format      string // the export format of both files, e.g. "openai_chat"
}

// UploadResult identifies the uploaded files at the provider: file ids at
// OpenAI, s3:// URIs at Bedrock.
type UploadResult struct {
	TrainFileID string `json:"train_file_id"`
	ValidFileID string `json:"valid_file_id,omitempty"`
}

// CreateRequest describes the fine-tuning job to start.
type CreateRequest struct {
	CurateJobID string
	BaseModel   string
	Method      Method
	Hyper       Hyperparameters
	Suffix      string // added to the fine-tuned model's name; optional
	Seed        *int64 // nil lets the provider choose
	TrainFileID string
	ValidFileID string // optional
}

// Job is a fine-tuning job as the provider holds it.
type Job struct {
	ID          string // the provider's id: "ftjob-..." at OpenAI, the job ARN at Bedrock
	CurateJobID string
	BaseModel   string
	CreatedAt   time.Time
	Status      Status
}

// State is a job's state in Curate's words, the same for every provider.
type State string

// The states a provider job moves through.
const (
	StateValidating State = "validating"
	StateQueued     State = "queued"
	StateRunning    State = "running"
	StateSucceeded  State = "succeeded"
	StateFailed     State = "failed"
	StateCancelled  State = "cancelled"
)

// Terminal reports whether the job has stopped for good.
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCancelled
}

// Status is a job's state and what is known of its progress.
type Status struct {
	State          State
	ProviderState  string // the provider's own word, e.g. "validating_files" or "InProgress"
	Progress       Progress
	TrainedTokens  int64
	FineTunedModel string // set once the job has succeeded
	Error          string // the provider's reason when the job failed
}

// Progress is how far training has gone. Zero fields are unknown, not
// zero: a caller keeps the last value it stored.
type Progress struct {
	Step        int
	TotalSteps  int
	Epoch       int
	TotalEpochs int
}

// EventCursor marks the last event a caller has seen; the zero value means
// none. It is opaque to callers, who store it and hand it back.
type EventCursor string

// Event is one line of the provider's job log.
type Event struct {
	ID      string
	At      time.Time
	Level   string      // "info", "warn" or "error"
	Message string      // as the provider wrote it
	Metric  *StepMetric // set when the event carries a training step's metrics
}

// Checkpoint is a usable intermediate model saved during training.
type Checkpoint struct {
	ID      string
	Step    int
	Model   string // name of the checkpoint model at the provider
	At      time.Time
	Metrics StepMetric
}

// PollResult is what one Poll learns.
type PollResult struct {
	Status      Status
	Events      []Event      // events after the cursor, oldest first
	Checkpoints []Checkpoint // every checkpoint so far, in step order
	// Records are the lines of the trainer's own metrics log written
	// after the cursor, oldest first; only the local trainer keeps one.
	Records []Record
	Cursor  EventCursor // hand this to the next Poll
}

// Record is one line of a trainer's metrics log (the local trainer's
// metrics.jsonl): a JSON object as the trainer wrote it, with its byte
// offset in the log, which tells a line read twice from a new one.
type Record struct {
	Offset int64
	Line   json.RawMessage
}

// StepMetric is one training step's metrics. A nil field was not measured
// at that step (validation runs less often than training, for instance).
type StepMetric struct {
	Step                   int      `json:"step"`
	Epoch                  int      `json:"epoch,omitempty"`
	TrainLoss              *float64 `json:"train_loss,omitempty"`
	TrainAccuracy          *float64 `json:"train_accuracy,omitempty"`
	ValidLoss              *float64 `json:"valid_loss,omitempty"`
	ValidMeanTokenAccuracy *float64 `json:"valid_mean_token_accuracy,omitempty"`
}
