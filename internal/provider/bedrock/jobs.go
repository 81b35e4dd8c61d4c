package bedrock

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrock"
	"github.com/aws/aws-sdk-go-v2/service/bedrock/types"

	"github.com/curate/curate/internal/provider"
)

// jobName is the Bedrock job name, and its client request token, for a
// Curate job.
func jobName(curateJobID string) string { return "curate-" + curateJobID }

// modelName is the name of the custom model the job makes.
func modelName(req provider.CreateRequest) string {
	if req.Suffix != "" {
		return req.Suffix + "-" + req.CurateJobID
	}
	return "curate-" + req.CurateJobID
}

// FindJob looks for the job named after the Curate job.
func (p *Provider) FindJob(ctx context.Context, curateJobID string) (provider.Job, bool, error) {
	if fe := provider.CheckCurateJobID(curateJobID); fe != nil {
		return provider.Job{}, false, provider.Invalid([]provider.FieldError{*fe})
	}
	name := jobName(curateJobID)
	pages := bedrock.NewListModelCustomizationJobsPaginator(p.bedrock, &bedrock.ListModelCustomizationJobsInput{
		NameContains: aws.String(name),
		SortBy:       types.SortJobsByCreationTime,
		SortOrder:    types.SortOrderDescending,
		MaxResults:   aws.Int32(100),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return provider.Job{}, false, fail("list jobs", err)
		}
		for _, s := range page.ModelCustomizationJobSummaries {
			if aws.ToString(s.JobName) == name {
				job, err := p.get(ctx, aws.ToString(s.JobArn))
				return job, err == nil, err
			}
		}
	}
	return provider.Job{}, false, nil
}

// Create starts the model customization job, with the Curate job's name
// and client request token: Bedrock answers a repeated token with the job
// it already made.
func (p *Provider) Create(ctx context.Context, req provider.CreateRequest) (provider.Job, error) {
	if err := checkCreate(req); err != nil {
		return provider.Job{}, err
	}
	in := &bedrock.CreateModelCustomizationJobInput{
		JobName:             aws.String(jobName(req.CurateJobID)),
		ClientRequestToken:  aws.String(jobName(req.CurateJobID)),
		CustomModelName:     aws.String(modelName(req)),
		BaseModelIdentifier: aws.String(req.BaseModel),
		CustomizationType:   types.CustomizationTypeFineTuning,
		RoleArn:             aws.String(p.roleARN),
		TrainingDataConfig:  &types.TrainingDataConfig{S3Uri: aws.String(req.TrainFileID)},
		OutputDataConfig:    &types.OutputDataConfig{S3Uri: aws.String(p.uri(p.key(req.CurateJobID, "output") + "/"))},
		HyperParameters:     hyperParameters(req.BaseModel, req.Hyper),
		JobTags:             []types.Tag{{Key: aws.String("curate-job-id"), Value: aws.String(req.CurateJobID)}},
	}
	if req.ValidFileID != "" {
		in.ValidationDataConfig = &types.ValidationDataConfig{Validators: []types.Validator{{S3Uri: aws.String(req.ValidFileID)}}}
	}
	out, err := p.bedrock.CreateModelCustomizationJob(ctx, in)
	if err != nil {
		return provider.Job{}, fail("create job", err)
	}
	// Bedrock answers with the ARN only; a new job starts by checking its data.
	return provider.Job{
		ID: aws.ToString(out.JobArn), CurateJobID: req.CurateJobID, BaseModel: req.BaseModel,
		Status: provider.Status{State: provider.StateValidating, ProviderState: string(types.ModelCustomizationJobStatusInProgress)},
	}, nil
}

// Poll reads the job's status. Bedrock keeps no event log or checkpoints
// for these jobs, so the cursor comes back unchanged.
func (p *Provider) Poll(ctx context.Context, jobARN string, since provider.EventCursor) (provider.PollResult, error) {
	job, err := p.get(ctx, jobARN)
	if err != nil {
		return provider.PollResult{}, err
	}
	return provider.PollResult{Status: job.Status, Cursor: since}, nil
}

// Cancel stops the job; it passes through Stopping to Stopped.
func (p *Provider) Cancel(ctx context.Context, jobARN string) error {
	_, err := p.bedrock.StopModelCustomizationJob(ctx, &bedrock.StopModelCustomizationJobInput{JobIdentifier: aws.String(jobARN)})
	return fail("stop job", err)
}

func (p *Provider) get(ctx context.Context, jobARN string) (provider.Job, error) {
	out, err := p.bedrock.GetModelCustomizationJob(ctx, &bedrock.GetModelCustomizationJobInput{JobIdentifier: aws.String(jobARN)})
	if err != nil {
		return provider.Job{}, fail("get job", err)
	}
	return toJob(out), nil
}

func toJob(out *bedrock.GetModelCustomizationJobOutput) provider.Job {
	st := provider.Status{ProviderState: string(out.Status)}
	switch out.Status {
	case types.ModelCustomizationJobStatusInProgress:
		st.State = provider.StateRunning
		if d := out.StatusDetails; d != nil && d.DataProcessingDetails != nil && d.DataProcessingDetails.Status == types.JobStatusDetailsInProgress {
			st.State = provider.StateValidating
		}
	case types.ModelCustomizationJobStatusCompleted:
		st.State = provider.StateSucceeded
		st.FineTunedModel = aws.ToString(out.OutputModelArn)
	case types.ModelCustomizationJobStatusFailed:
		st.State = provider.StateFailed
		st.Error = aws.ToString(out.FailureMessage)
	case types.ModelCustomizationJobStatusStopped:
		st.State = provider.StateCancelled
	default:
		// Stopping, or a status added after this was written: not over yet.
		st.State = provider.StateRunning
	}
	if n, err := strconv.Atoi(out.HyperParameters[Spelling.Name(provider.FieldEpochs)]); err == nil {
		st.Progress.TotalEpochs = n
	}
	curateID, _ := strings.CutPrefix(aws.ToString(out.JobName), "curate-")
	var created time.Time
	if out.CreationTime != nil {
		created = out.CreationTime.UTC()
	}
	return provider.Job{
		ID:          aws.ToString(out.JobArn),
		CurateJobID: curateID,
		BaseModel:   modelID(aws.ToString(out.BaseModelArn)),
		CreatedAt:   created,
		Status:      st,
	}
}
