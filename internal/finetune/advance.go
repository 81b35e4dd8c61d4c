package finetune

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
)

// Step names the step Advance took.
type Step string

// The steps, in the order a job takes them.
const (
	StepPrepare   Step = "prepare"    // write the dataset version's files and keep their digests
	StepUpload    Step = "upload"     // write them again and send them to the provider
	StepWaitFiles Step = "wait_files" // until the provider has processed them
	StepCreate    Step = "create"     // adopt a job made earlier, or create one
	StepCancel    Step = "cancel"     // pass a cancellation on
	StepPoll      Step = "poll"       // read state, events, checkpoints and metrics
	StepDone      Step = "done"       // nothing left to do
)

// Outcome is what one Advance did and what comes next.
type Outcome struct {
	Step Step
	Done bool // the job has ended; stop calling
	// Wait is how long to wait before the next call; 0 means at once.
	Wait time.Duration
}

// Advance takes the job's next step and stores its result before it
// returns. A worker calls it until Done, waiting Wait between calls. A
// provider's refusal (a permanent error) ends the job as failed with the
// provider's message; any other error is returned for a retry, which
// resumes from what was stored.
func (s *Service) Advance(ctx context.Context, id uuid.UUID) (Outcome, error) {
	q := db.New(s.Pool)
	j, err := q.FineTuneJobGetByID(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Outcome{Step: StepDone, Done: true}, nil // deleted with its organisation
	}
	if err != nil {
		return Outcome{}, err
	}
	if Terminal(j.Status) {
		return Outcome{Step: StepDone, Done: true}, nil
	}
	p, _, err := s.client(ctx, j.Provider)
	if err != nil {
		return s.finish(ctx, j, db.FinetuneStatusFailed, "", s.describe(j, err), 0)
	}

	step, out, err := s.step(ctx, q, p, j)
	if err == nil {
		out.Step = step
		if out.Wait > 0 && j.CancelRequestedAt == nil {
			// A cancellation asked for during this step is passed on now,
			// not after the wait.
			if now, err := q.FineTuneJobGetByID(ctx, id); err == nil && now.CancelRequestedAt != nil {
				out.Wait = 0
			}
		}
		return out, nil
	}
	if provider.IsPermanent(err) {
		out, ferr := s.finish(ctx, j, db.FinetuneStatusFailed, "", s.describe(j, err), j.TrainedTokens)
		out.Step = step
		return out, ferr
	}
	return Outcome{Step: step}, fmt.Errorf("fine-tuning job %s, step %s: %w", j.ID, step, err)
}

// step picks the next step from what is stored and takes it.
func (s *Service) step(ctx context.Context, q *db.Queries, p provider.Provider, j db.FineTuningJob) (Step, Outcome, error) {
	cancelling := j.CancelRequestedAt != nil
	switch {
	case cancelling && j.ProviderJobID == "" && !j.FilesReady:
		// Nothing trains at the provider yet: stop here, at no charge.
		out, err := s.finish(ctx, j, db.FinetuneStatusCancelled, "", "", 0)
		return StepCancel, out, err
	case j.TrainFileID == "" && j.TrainSha256 == "":
		return StepPrepare, Outcome{}, s.prepare(ctx, q, j)
	case j.TrainFileID == "":
		return StepUpload, Outcome{}, s.upload(ctx, q, p, j)
	case !j.FilesReady:
		ready, err := p.WaitUploaded(ctx, provider.UploadResult{TrainFileID: j.TrainFileID, ValidFileID: j.ValidFileID})
		if err != nil || !ready {
			return StepWaitFiles, Outcome{Wait: s.pollEvery()}, err
		}
		return StepWaitFiles, Outcome{}, q.FineTuneJobUpdateFilesReady(ctx, j.ID)
	case j.ProviderJobID == "":
		out, err := s.create(ctx, q, p, j, cancelling)
		return StepCreate, out, err
	case cancelling && j.CancelSentAt == nil:
		if err := p.Cancel(ctx, j.ProviderJobID); err != nil && !provider.IsPermanent(err) {
			return StepCancel, Outcome{}, err
		}
		// A refusal means the job already ended; polling finds out how.
		return StepCancel, Outcome{}, q.FineTuneJobUpdateCancelSent(ctx, j.ID)
	}
	out, err := s.poll(ctx, p, j)
	return StepPoll, out, err
}

// jobFiles are a job's training files in a scratch folder, with their
// sha256 digests (validSum is "" without a validation split).
type jobFiles struct {
	Prepared
	trainSum, validSum string
}

// writeFiles writes the job's files from its frozen dataset version into a
// fresh folder under Dir. Writing a version gives the same bytes every
// time and on every machine, so a step never needs what an earlier step
// wrote. The caller calls done when the step ends, which removes them.
func (s *Service) writeFiles(ctx context.Context, j db.FineTuningJob) (f jobFiles, done func(), err error) {
	src, err := s.source()
	if err != nil {
		return f, nil, err
	}
	dir, err := s.scratch("job-" + j.ID.String() + "-")
	if err != nil {
		return f, nil, err
	}
	done = func() { os.RemoveAll(dir) }
	defer func() {
		if err != nil {
			done()
		}
	}()
	f.Prepared, err = src.Prepare(ctx, j.OrgID, j.DatasetVersionID, export.Format(j.ExportFormat), dir)
	if errors.Is(err, errs.ErrNotFound) {
		return f, nil, &provider.Error{Provider: j.Provider, Op: "prepare files", Message: "the dataset version no longer exists", Permanent: true}
	}
	if err != nil {
		return f, nil, err
	}
	if f.trainSum, err = fileSum(f.TrainPath); err != nil {
		return f, nil, err
	}
	if f.ValidPath != "" {
		if f.validSum, err = fileSum(f.ValidPath); err != nil {
			return f, nil, err
		}
	}
	return f, done, nil
}

func fileSum(path string) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// prepare checks that the version's files can be written and keeps their
// digests, which pin what the upload sends.
func (s *Service) prepare(ctx context.Context, q *db.Queries, j db.FineTuningJob) error {
	f, done, err := s.writeFiles(ctx, j)
	if err != nil {
		return err
	}
	defer done()
	return q.FineTuneJobUpdatePrepared(ctx, db.FineTuneJobUpdatePreparedParams{ID: j.ID, TrainSha256: f.trainSum, ValidSha256: f.validSum})
}

// upload writes the files again, on whichever machine runs this step, and
// sends them. Files that differ from the prepared ones are not sent: the
// job fails rather than train on something else than was estimated. The
// provider adopts an upload an earlier, interrupted attempt made, so a
// retry does not pay for a second copy.
func (s *Service) upload(ctx context.Context, q *db.Queries, p provider.Provider, j db.FineTuningJob) error {
	f, done, err := s.writeFiles(ctx, j)
	if err != nil {
		return err
	}
	defer done()
	if f.trainSum != j.TrainSha256 || f.validSum != j.ValidSha256 {
		return &provider.Error{Provider: j.Provider, Op: "prepare files", Permanent: true,
			Message: "the dataset version's files came out different from those the job was prepared with, so nothing was uploaded"}
	}
	res, err := p.Upload(ctx, provider.UploadRequest{CurateJobID: j.ID.String(), TrainPath: f.TrainPath, ValidPath: f.ValidPath, Format: j.ExportFormat})
	if err != nil {
		return err
	}
	return q.FineTuneJobUpdateFiles(ctx, db.FineTuneJobUpdateFilesParams{ID: j.ID, TrainFileID: res.TrainFileID, ValidFileID: res.ValidFileID})
}

// create adopts the provider's job for this Curate job when an earlier
// attempt made one but died before storing it, and creates one otherwise
// (unless the job is being cancelled).
func (s *Service) create(ctx context.Context, q *db.Queries, p provider.Provider, j db.FineTuningJob, cancelling bool) (Outcome, error) {
	job, found, err := p.FindJob(ctx, j.ID.String())
	if err != nil {
		return Outcome{}, err
	}
	if !found {
		if cancelling {
			return s.finish(ctx, j, db.FinetuneStatusCancelled, "", "", 0)
		}
		var hyper provider.Hyperparameters
		if err := json.Unmarshal(j.Hyperparameters, &hyper); err != nil {
			return Outcome{}, err
		}
		req := provider.CreateRequest{CurateJobID: j.ID.String(), BaseModel: j.BaseModel, Method: provider.Method(j.Method),
			Hyper: hyper, Suffix: j.Suffix, TrainFileID: j.TrainFileID, ValidFileID: j.ValidFileID}
		if j.Seed.Valid {
			req.Seed = &j.Seed.Int64
		}
		if _, ok := p.(*local.Provider); ok {
			if err := s.recordWorker(ctx, q, j.ID); err != nil {
				return Outcome{}, err
			}
		}
		api, err := s.rewardAPI(ctx, j)
		if err != nil {
			return Outcome{}, err
		}
		if job, err = createJob(ctx, p, req, j.LocalSettings, api); err != nil {
			return Outcome{}, err
		}
	}
	return Outcome{}, q.FineTuneJobUpdateProviderJob(ctx, db.FineTuneJobUpdateProviderJobParams{ID: j.ID, ProviderJobID: job.ID,
		Status: status(job.Status.State), ProviderState: job.Status.ProviderState})
}

// createJob creates the provider's job; a local one is started with the
// job's own settings and, for an RLAIF run, its reward API.
func createJob(ctx context.Context, p provider.Provider, req provider.CreateRequest, settings json.RawMessage, api *local.RewardAPI) (provider.Job, error) {
	lp, ok := p.(*local.Provider)
	if !ok {
		return p.Create(ctx, req)
	}
	var s local.Settings
	if len(settings) > 0 {
		if err := json.Unmarshal(settings, &s); err != nil {
			return provider.Job{}, fmt.Errorf("the job's local settings: %w", err)
		}
	}
	s.RewardAPI = api
	return lp.CreateWith(ctx, req, s)
}

// status maps a provider's state to the job's.
func status(st provider.State) db.FinetuneStatus {
	switch st {
	case provider.StateValidating:
		return db.FinetuneStatusValidating
	case provider.StateQueued:
		return db.FinetuneStatusQueued
	case provider.StateSucceeded:
		return db.FinetuneStatusSucceeded
	case provider.StateFailed:
		return db.FinetuneStatusFailed
	case provider.StateCancelled:
		return db.FinetuneStatusCancelled
	}
	return db.FinetuneStatusRunning
}

// poll stores what the provider reports: events, checkpoints, per-step
// metrics, the trainer's metrics log and progress, and at the end the
// outcome and its cost.
func (s *Service) poll(ctx context.Context, p provider.Provider, j db.FineTuningJob) (Outcome, error) {
	res, err := p.Poll(ctx, j.ProviderJobID, provider.EventCursor(j.EventCursor))
	if err != nil {
		return Outcome{}, err
	}
	st := res.Status
	var metrics []provider.StepMetric
	for _, e := range res.Events {
		if e.Metric != nil {
			metrics = append(metrics, *e.Metric)
		}
	}
	// Some providers publish metrics only as files: read them while
	// training and, complete, at the end.
	if st.State == provider.StateSucceeded || (st.State == provider.StateRunning && len(metrics) == 0) {
		ms, err := p.Metrics(ctx, j.ProviderJobID)
		if err != nil {
			return Outcome{}, err
		}
		metrics = append(metrics, ms...)
	}
	pr := st.Progress
	for _, m := range metrics {
		if st.Progress.Step == 0 {
			pr.Step = max(pr.Step, m.Step)
		}
		if st.Progress.Epoch == 0 {
			pr.Epoch = max(pr.Epoch, m.Epoch)
		}
	}
	// Zero is "not reported": keep what was stored.
	keep := func(n int, stored int32) int32 {
		if n == 0 {
			return stored
		}
		return int32(n)
	}
	err = db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		for _, e := range res.Events {
			if err := q.FineTuneEventInsert(ctx, db.FineTuneEventInsertParams{JobID: j.ID, OrgID: j.OrgID, ProviderEventID: e.ID,
				At: e.At, Level: e.Level, Message: e.Message}); err != nil {
				return err
			}
		}
		for _, m := range metrics {
			if err := q.FineTuneMetricInsertOrUpdate(ctx, metricParams(j, m)); err != nil {
				return err
			}
		}
		for _, r := range res.Records {
			if err := q.FineTuneRunMetricInsert(ctx, db.FineTuneRunMetricInsertParams{JobID: j.ID, OrgID: j.OrgID, Seq: r.Offset, Record: r.Line}); err != nil {
				return err
			}
		}
		for _, c := range res.Checkpoints {
			mj, err := json.Marshal(c.Metrics)
			if err != nil {
				return err
			}
			if err := q.FineTuneCheckpointInsertOrUpdate(ctx, db.FineTuneCheckpointInsertOrUpdateParams{JobID: j.ID, OrgID: j.OrgID,
				ProviderCheckpointID: c.ID, Step: int32(c.Step), Model: c.Model, At: c.At, Metrics: mj}); err != nil {
				return err
			}
		}
		tokens := st.TrainedTokens
		if tokens == 0 {
			tokens = j.TrainedTokens
		}
		if err := q.FineTuneJobUpdateProgress(ctx, db.FineTuneJobUpdateProgressParams{ID: j.ID, Status: status(st.State),
			ProviderState: st.ProviderState, EventCursor: string(res.Cursor), Step: keep(pr.Step, j.Step),
			TotalSteps: keep(pr.TotalSteps, j.TotalSteps), Epoch: keep(pr.Epoch, j.Epoch), TotalEpochs: keep(pr.TotalEpochs, j.TotalEpochs),
			TrainedTokens: tokens, FineTunedModel: st.FineTunedModel}); err != nil {
			return err
		}
		if st.State.Terminal() {
			return s.finishTx(ctx, tx, j, status(st.State), st.ProviderState, st.Error, tokens, st.FineTunedModel)
		}
		return nil
	})
	if err != nil {
		return Outcome{}, err
	}
	if st.State.Terminal() {
		return Outcome{Done: true}, nil
	}
	return Outcome{Wait: s.pollEvery()}, nil
}

func metricParams(j db.FineTuningJob, m provider.StepMetric) db.FineTuneMetricInsertOrUpdateParams {
	f := func(v *float64) pgtype.Float8 {
		if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
			return pgtype.Float8{}
		}
		return pgtype.Float8{Float64: *v, Valid: true}
	}
	return db.FineTuneMetricInsertOrUpdateParams{JobID: j.ID, OrgID: j.OrgID, Step: int32(m.Step), Epoch: int32(m.Epoch),
		TrainLoss: f(m.TrainLoss), TrainAccuracy: f(m.TrainAccuracy), ValidLoss: f(m.ValidLoss), ValidMeanTokenAccuracy: f(m.ValidMeanTokenAccuracy)}
}

// finish ends a job and records what it cost.
func (s *Service) finish(ctx context.Context, j db.FineTuningJob, st db.FinetuneStatus, providerState, message string, tokens int64) (Outcome, error) {
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, _ *db.Queries) error {
		return s.finishTx(ctx, tx, j, st, providerState, message, tokens, "")
	})
	return Outcome{Done: true}, err
}

// Fail ends a job that cannot go on, e.g. when its worker has used up its
// retries, keeping the reason in words.
func (s *Service) Fail(ctx context.Context, id uuid.UUID, cause error) error {
	j, err := db.New(s.Pool).FineTuneJobGetByID(ctx, id)
	if err != nil || Terminal(j.Status) {
		return err
	}
	_, err = s.finish(ctx, j, db.FinetuneStatusFailed, j.ProviderState, s.describe(j, cause), j.TrainedTokens)
	return err
}

// describe is the sentence a failed job's page shows for err; the error
// itself, with the provider's or the network's own text, goes to the log.
func (s *Service) describe(j db.FineTuningJob, err error) string {
	s.log().Warn("fine-tuning job failed", "job", j.ID, "provider", j.Provider, "err", err)
	return outbound.Describe(err)
}

// ActualCost is what the provider's trained tokens come to at the price
// the job was launched with.
func ActualCost(tokens, pricePerMillion int64) int64 {
	return int64(math.Round(float64(tokens) * float64(pricePerMillion) / 1e6))
}

func (s *Service) finishTx(ctx context.Context, tx pgx.Tx, j db.FineTuningJob, st db.FinetuneStatus, providerState, message string, tokens int64, model string) error {
	q := db.New(tx)
	if providerState == "" {
		providerState = j.ProviderState
	}
	cost := ActualCost(tokens, j.PricePerMillion)
	// The run's reward key, if it holds one, ends with it.
	if err := revokeRunKey(ctx, q, j); err != nil {
		return err
	}
	if err := q.FineTuneJobUpdateFinished(ctx, db.FineTuneJobUpdateFinishedParams{ID: j.ID, Status: st, ProviderState: providerState,
		ErrorMessage: message, TrainedTokens: tokens, FineTunedModel: model,
		ActualCost: pgtype.Int8{Int64: cost, Valid: true}}); err != nil {
		return err
	}
	// What a job trained joins the registry as it succeeds, so a
	// succeeded job always has its version.
	if st == db.FinetuneStatusSucceeded && model != "" && s.Registry != nil {
		if _, err := s.Registry.RegisterJobTx(ctx, tx, j, model, tokens, cost); err != nil {
			return fmt.Errorf("registering the trained model: %w", err)
		}
	}
	return nil
}
