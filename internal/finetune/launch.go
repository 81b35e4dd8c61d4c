package finetune

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
)

// Launch checks the request, refuses it when its estimate exceeds what is
// left of this month's budget, and stores the job and its worker in one
// transaction. The budget row is locked meanwhile, so two launches at once
// cannot both spend the same money.
func (s *Service) Launch(ctx context.Context, actor audit.Actor, orgID uuid.UUID, req Request) (db.FineTuningJob, Estimate, error) {
	est, err := s.Estimate(ctx, orgID, req)
	if err != nil {
		return db.FineTuningJob{}, est, err
	}
	req = est.Request
	if err := s.checkRLAIF(ctx, orgID, req, est.Version.Label); err != nil {
		return db.FineTuningJob{}, est, err
	}
	hyper, err := json.Marshal(req.Hyper)
	if err != nil {
		return db.FineTuningJob{}, est, err
	}
	settings := []byte("{}")
	if req.Local != nil {
		if settings, err = json.Marshal(req.Local); err != nil {
			return db.FineTuningJob{}, est, err
		}
	}
	var job db.FineTuningJob
	err = db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		if err := q.FineTuneBudgetInsertDefault(ctx, db.FineTuneBudgetInsertDefaultParams{OrgID: orgID, Monthly: int64(s.DefaultBudget)}); err != nil {
			return err
		}
		if _, err := q.FineTuneBudgetGetForUpdate(ctx, orgID); err != nil {
			return err
		}
		if est.Budget, err = s.budget(ctx, q, orgID); err != nil {
			return err
		}
		if !est.Fits() {
			return OverBudget(est)
		}
		// The budget row's lock serialises the organisation's launches, so
		// the count gives each unnamed job its own number.
		earlier, err := q.FineTuneJobCountByVersion(ctx, db.FineTuneJobCountByVersionParams{OrgID: orgID, DatasetVersionID: req.VersionID})
		if err != nil {
			return err
		}
		p := db.FineTuneJobInsertParams{
			OrgID: orgID, DatasetVersionID: req.VersionID, DatasetLabel: est.Version.Label, DatasetKind: string(est.Version.Kind),
			Provider: req.Provider, BaseModel: req.BaseModel, Method: string(req.Method), ExportFormat: string(est.Format),
			Hyperparameters: hyper, Suffix: req.Suffix, TrainExamples: int32(est.TrainExamples), EstimatedTokens: est.TrainedTokens,
			EstimatedEpochs: int32(est.Epochs), PriceID: uuid.NullUUID{UUID: est.Price.ID, Valid: est.Price.ID != uuid.Nil},
			PricePerMillion: int64(pricing.Dollars(est.Price.PerMillion)), PriceDate: est.Price.Date,
			EstimatedCost: int64(est.Cost), CreatedByLabel: actor.Label, LocalSettings: settings,
			Name: JobName(est.Version.Label, req.Suffix, earlier+1), RegisteredModel: req.RegisteredModel,
		}
		if req.Seed != nil {
			p.Seed = pgtype.Int8{Int64: *req.Seed, Valid: true}
		}
		if actor.Kind == "user" {
			p.CreatedBy = uuid.NullUUID{UUID: actor.ID, Valid: true}
		}
		if job, err = q.FineTuneJobInsert(ctx, p); err != nil {
			return err
		}
		res, err := s.Jobs.InsertTx(ctx, tx, JobArgs{JobID: job.ID, Local: req.Provider == local.Name}, nil)
		if err != nil {
			return err
		}
		job.RiverJobID = pgtype.Int8{Int64: res.Job.ID, Valid: true}
		if err := q.FineTuneJobUpdateRiverID(ctx, db.FineTuneJobUpdateRiverIDParams{ID: job.ID, RiverJobID: job.RiverJobID}); err != nil {
			return err
		}
		details := map[string]any{"provider": req.Provider, "base_model": req.BaseModel,
			"method": req.Method, "dataset": est.Version.Label, "estimated_usd": est.Cost.Dollars()}
		if req.RequestedModel != "" {
			details["requested_base_model"] = req.RequestedModel
		}
		if req.NewestSuitable {
			// The request named no dataset: the job says which it trains.
			details["dataset_chosen"] = "newest suitable"
			if err := q.FineTuneEventInsert(ctx, db.FineTuneEventInsertParams{JobID: job.ID, OrgID: orgID, ProviderEventID: "curate-dataset-chosen",
				At: job.CreatedAt, Level: "info", Message: ChosenVersionNote(est.Version.Label, req.Method)}); err != nil {
				return err
			}
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "finetune.launch", TargetType: "fine_tuning_job",
			TargetID: job.ID.String(), Details: details})
	})
	return job, est, err
}

// ChosenVersionNote is the job's event saying which version it trains when
// the launch named none.
func ChosenVersionNote(label string, method provider.Method) string {
	return fmt.Sprintf("No dataset version was named: training on %s, the organisation's newest frozen version that passed validation for %s training.", label, method)
}

// JobName is a job's readable name: its dataset version and its suffix,
// or "ft-N" for the Nth job on that version when it has no suffix
// ("Support answers v3 · ft-2").
func JobName(versionLabel, suffix string, nth int64) string {
	if suffix == "" {
		suffix = fmt.Sprintf("ft-%d", nth)
	}
	return versionLabel + " · " + suffix
}

// OverBudget is the refusal of a launch that costs more than is left,
// with the figures.
func OverBudget(est Estimate) error {
	return errs.InvalidField("budget", "the estimated cost %s (%d tokens × %d epochs at $%g per million, the price of %s effective %s) exceeds the %s left of this month's %s budget (%s spent or committed)",
		est.Cost, est.TokensPerEpoch, est.Epochs, est.Price.PerMillion, est.Price.BaseModel, est.Price.Date, est.Budget.Left(), est.Budget.Monthly, est.Budget.Spent)
}

// Cancel asks for a job to be stopped and wakes its worker, which carries
// it out at the provider. A job that has already ended is a conflict, and
// costs nothing more.
func (s *Service) Cancel(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID) (db.FineTuningJob, error) {
	var job db.FineTuningJob
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		var err error
		job, err = q.FineTuneJobGetForUpdate(ctx, db.FineTuneJobGetForUpdateParams{OrgID: orgID, ID: id})
		if err != nil {
			return errs.NotFound(err)
		}
		if Terminal(job.Status) {
			return &errs.Conflict{Message: "this job has already " + finished(job.Status) + "; there is nothing to cancel and nothing more is charged"}
		}
		if err := q.FineTuneJobUpdateCancelRequested(ctx, db.FineTuneJobUpdateCancelRequestedParams{OrgID: orgID, ID: id}); err != nil {
			return err
		}
		now := time.Now()
		job.CancelRequestedAt = &now
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "finetune.cancel", TargetType: "fine_tuning_job", TargetID: id.String()})
	})
	if err != nil {
		return job, err
	}
	// The worker may be snoozing until its next look at the provider: bring
	// that look forward. Should waking fail, the cancel is still recorded
	// and that next look, at most PollEvery away, carries it out.
	if job.RiverJobID.Valid {
		_, _ = s.Jobs.JobRetry(ctx, job.RiverJobID.Int64)
	}
	return job, nil
}

// Terminal reports whether a job has stopped for good.
func Terminal(st db.FinetuneStatus) bool {
	return st == db.FinetuneStatusSucceeded || st == db.FinetuneStatusFailed || st == db.FinetuneStatusCancelled
}

func finished(st db.FinetuneStatus) string {
	if st == db.FinetuneStatusCancelled {
		return "been cancelled"
	}
	return string(st)
}
