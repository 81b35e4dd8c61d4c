package openai

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/curate/curate/internal/provider"
)

// maxScannedJobs bounds FindJob's walk through the job list when the
// metadata filter is not applied by the server.
const maxScannedJobs = 500

// FindJob returns the newest job whose metadata carries this Curate job
// id. It asks the API to filter on the metadata and checks each job itself
// as well, so it is right whether or not the filter is applied.
func (p *Provider) FindJob(ctx context.Context, curateJobID string) (provider.Job, bool, error) {
	if fe := provider.CheckCurateJobID(curateJobID); fe != nil {
		return provider.Job{}, false, provider.Invalid([]provider.FieldError{*fe})
	}
	iter := p.client.FineTuning.Jobs.ListAutoPaging(ctx, sdk.FineTuningJobListParams{
		Limit:    sdk.Int(100),
		Metadata: map[string]string{metadataKey: curateJobID},
	})
	for seen := 0; seen < maxScannedJobs && iter.Next(); seen++ {
		if j := iter.Current(); j.Metadata[metadataKey] == curateJobID {
			return toJob(&j), true, nil
		}
	}
	if err := iter.Err(); err != nil {
		return provider.Job{}, false, fail("list jobs", err)
	}
	return provider.Job{}, false, nil
}

// Create starts the job, tagged with Curate's job id in its metadata and
// idempotent on that id.
func (p *Provider) Create(ctx context.Context, req provider.CreateRequest) (provider.Job, error) {
	if err := checkCreate(req); err != nil {
		return provider.Job{}, err
	}
	params := sdk.FineTuningJobNewParams{
		Model:        sdk.FineTuningJobNewParamsModel(req.BaseModel),
		TrainingFile: req.TrainFileID,
		Metadata:     shared.Metadata{metadataKey: req.CurateJobID},
		Method:       method(req.Method, req.Hyper),
	}
	if req.ValidFileID != "" {
		params.ValidationFile = sdk.String(req.ValidFileID)
	}
	if req.Suffix != "" {
		params.Suffix = sdk.String(req.Suffix)
	}
	if req.Seed != nil {
		params.Seed = sdk.Int(*req.Seed)
	}
	job, err := p.client.FineTuning.Jobs.New(ctx, params, idempotencyKey(req.CurateJobID, "job"))
	if err != nil {
		return provider.Job{}, fail("create job", err)
	}
	return toJob(job), nil
}

// method builds the method parameter. An "auto" setting is left out, which
// OpenAI reads as auto.
func method(m provider.Method, h provider.Hyperparameters) sdk.FineTuningJobNewParamsMethod {
	epochs, epochsSet := h.Epochs.Number()
	batch, batchSet := h.BatchSize.Number()
	lr, lrSet := h.LearningRateMultiplier.Number()
	if m == provider.DPO {
		var hp sdk.DpoHyperparameters
		if epochsSet {
			hp.NEpochs.OfInt = sdk.Int(int64(epochs))
		}
		if batchSet {
			hp.BatchSize.OfInt = sdk.Int(int64(batch))
		}
		if lrSet {
			hp.LearningRateMultiplier.OfFloat = sdk.Float(lr)
		}
		if beta, ok := h.Beta.Number(); ok {
			hp.Beta.OfFloat = sdk.Float(beta)
		}
		return sdk.FineTuningJobNewParamsMethod{Type: "dpo", Dpo: sdk.DpoMethodParam{Hyperparameters: hp}}
	}
	var hp sdk.SupervisedHyperparameters
	if epochsSet {
		hp.NEpochs.OfInt = sdk.Int(int64(epochs))
	}
	if batchSet {
		hp.BatchSize.OfInt = sdk.Int(int64(batch))
	}
	if lrSet {
		hp.LearningRateMultiplier.OfFloat = sdk.Float(lr)
	}
	return sdk.FineTuningJobNewParamsMethod{Type: "supervised", Supervised: sdk.SupervisedMethodParam{Hyperparameters: hp}}
}

// states maps OpenAI's job statuses to Curate's.
var states = map[sdk.FineTuningJobStatus]provider.State{
	sdk.FineTuningJobStatusValidatingFiles: provider.StateValidating,
	sdk.FineTuningJobStatusQueued:          provider.StateQueued,
	sdk.FineTuningJobStatusRunning:         provider.StateRunning,
	sdk.FineTuningJobStatusSucceeded:       provider.StateSucceeded,
	sdk.FineTuningJobStatusFailed:          provider.StateFailed,
	sdk.FineTuningJobStatusCancelled:       provider.StateCancelled,
}

func toJob(j *sdk.FineTuningJob) provider.Job {
	st, ok := states[j.Status]
	if !ok {
		// A status added after this was written: keep polling.
		st = provider.StateRunning
	}
	return provider.Job{
		ID:          j.ID,
		CurateJobID: j.Metadata[metadataKey],
		BaseModel:   j.Model,
		CreatedAt:   time.Unix(j.CreatedAt, 0).UTC(),
		Status: provider.Status{
			State:          st,
			ProviderState:  string(j.Status),
			TrainedTokens:  j.TrainedTokens,
			FineTunedModel: j.FineTunedModel,
			Error:          j.Error.Message,
			Progress:       provider.Progress{TotalEpochs: int(epochsOf(j))},
		},
	}
}

// epochsOf returns the epoch count the job runs, which OpenAI reports
// once it has resolved "auto"; 0 while unknown.
func epochsOf(j *sdk.FineTuningJob) int64 {
	switch j.Method.Type {
	case "dpo":
		return j.Method.Dpo.Hyperparameters.NEpochs.OfInt
	case "supervised":
		return j.Method.Supervised.Hyperparameters.NEpochs.OfInt
	}
	return j.Hyperparameters.NEpochs.OfInt
}

// maxEventPages bounds how far back one Poll reads the event log. Events
// are the job's log; the complete per-step metrics come from Metrics.
const maxEventPages = 10

// Poll reads the job, the events after the cursor and, once training has
// begun, the checkpoints.
func (p *Provider) Poll(ctx context.Context, jobID string, since provider.EventCursor) (provider.PollResult, error) {
	j, err := p.client.FineTuning.Jobs.Get(ctx, jobID)
	if err != nil {
		return provider.PollResult{}, fail("get job", err)
	}
	job := toJob(j)
	res := provider.PollResult{Status: job.Status, Cursor: since}

	events, latest, err := p.eventsSince(ctx, jobID, string(since))
	if err != nil {
		return provider.PollResult{}, err
	}
	res.Events = events
	if len(events) > 0 {
		res.Cursor = provider.EventCursor(events[len(events)-1].ID)
	}
	if latest != nil {
		res.Status.Progress = progress(latest, job.Status.Progress.TotalEpochs)
	}

	if st := job.Status.State; st == provider.StateRunning || st == provider.StateSucceeded {
		if res.Checkpoints, err = p.checkpoints(ctx, jobID); err != nil {
			return provider.PollResult{}, err
		}
	}
	return res, nil
}

// metricsData is the data of a "metrics" event.
type metricsData struct {
	Step                   int      `json:"step"`
	TotalSteps             int      `json:"total_steps"`
	TrainLoss              *float64 `json:"train_loss"`
	TrainMeanTokenAccuracy *float64 `json:"train_mean_token_accuracy"`
	ValidLoss              *float64 `json:"valid_loss"`
	ValidMeanTokenAccuracy *float64 `json:"valid_mean_token_accuracy"`
}

// eventsSince returns the events after the one with id `after`, oldest
// first, and the data of the newest metrics event read.
func (p *Provider) eventsSince(ctx context.Context, jobID, after string) ([]provider.Event, *metricsData, error) {
	// OpenAI lists events newest first: read back until the cursor.
	var newest []provider.Event
	var latest *metricsData
	page, err := p.client.FineTuning.Jobs.ListEvents(ctx, jobID, sdk.FineTuningJobListEventsParams{Limit: sdk.Int(100)})
	for n := 0; err == nil && page != nil && n < maxEventPages; n++ {
		for _, e := range page.Data {
			if after != "" && e.ID == after {
				slices.Reverse(newest)
				return newest, latest, nil
			}
			ev := provider.Event{ID: e.ID, At: time.Unix(e.CreatedAt, 0).UTC(), Level: string(e.Level), Message: e.Message}
			if e.Type == sdk.FineTuningJobEventTypeMetrics {
				var d metricsData
				if json.Unmarshal([]byte(e.JSON.Data.Raw()), &d) == nil && d.Step > 0 {
					ev.Metric = &provider.StepMetric{
						Step: d.Step, TrainLoss: d.TrainLoss, TrainAccuracy: d.TrainMeanTokenAccuracy,
						ValidLoss: d.ValidLoss, ValidMeanTokenAccuracy: d.ValidMeanTokenAccuracy,
					}
					if latest == nil {
						latest = &d
					}
				}
			}
			newest = append(newest, ev)
		}
		page, err = page.GetNextPage()
	}
	if err != nil {
		return nil, nil, fail("list events", err)
	}
	slices.Reverse(newest)
	return newest, latest, nil
}

// progress turns a metrics event into progress. OpenAI reports steps, not
// epochs; with the epoch count known, the epoch is the share of steps done.
func progress(d *metricsData, epochs int) provider.Progress {
	pr := provider.Progress{Step: d.Step, TotalSteps: d.TotalSteps, TotalEpochs: epochs}
	if epochs > 0 && d.TotalSteps > 0 {
		pr.Epoch = int(math.Ceil(float64(d.Step) * float64(epochs) / float64(d.TotalSteps)))
	}
	return pr
}

// checkpoints lists the job's checkpoints in step order.
func (p *Provider) checkpoints(ctx context.Context, jobID string) ([]provider.Checkpoint, error) {
	iter := p.client.FineTuning.Jobs.Checkpoints.ListAutoPaging(ctx, jobID, sdk.FineTuningJobCheckpointListParams{Limit: sdk.Int(100)})
	var out []provider.Checkpoint
	for iter.Next() {
		c := iter.Current()
		m := c.Metrics
		sm := provider.StepMetric{Step: int(c.StepNumber)}
		if m.JSON.TrainLoss.Valid() {
			sm.TrainLoss = &m.TrainLoss
		}
		if m.JSON.TrainMeanTokenAccuracy.Valid() {
			sm.TrainAccuracy = &m.TrainMeanTokenAccuracy
		}
		if m.JSON.ValidLoss.Valid() {
			sm.ValidLoss = &m.ValidLoss
		}
		if m.JSON.ValidMeanTokenAccuracy.Valid() {
			sm.ValidMeanTokenAccuracy = &m.ValidMeanTokenAccuracy
		}
		out = append(out, provider.Checkpoint{
			ID: c.ID, Step: int(c.StepNumber), Model: c.FineTunedModelCheckpoint,
			At: time.Unix(c.CreatedAt, 0).UTC(), Metrics: sm,
		})
	}
	if err := iter.Err(); err != nil {
		return nil, fail("list checkpoints", err)
	}
	slices.SortFunc(out, func(a, b provider.Checkpoint) int { return a.Step - b.Step })
	return out, nil
}

// Cancel cancels the job.
func (p *Provider) Cancel(ctx context.Context, jobID string) error {
	_, err := p.client.FineTuning.Jobs.Cancel(ctx, jobID)
	return fail("cancel job", err)
}
