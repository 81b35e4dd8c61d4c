// Package overview counts what the start page shows: the work waiting for
// the signed-in user and for the organisation, each count a way into the
// page that lists it, and the state of the loop's second half: what each
// model alias serves, deployments under way, experiments on with their
// recommendation, and evaluations running or failed.
package overview

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/feedback"
)

// Service reads the start page's counts.
type Service struct {
	Pool *pgxpool.Pool
	// Experiments analyses the running experiments for their
	// recommendation, as their panels do.
	Experiments *experiments.Service
}

// New builds the start page's counts; experiments gives the running
// experiments' recommendations as their panels do.
func New(pool *pgxpool.Pool, experiments *experiments.Service) *Service {
	return &Service{Pool: pool, Experiments: experiments}
}

// Summary is the start page's counts for one user of one organisation.
type Summary struct {
	// ByStatus counts the queue's items per review status, as the queue's
	// own status tabs count them (duplicates left out).
	ByStatus map[string]int64
	// MineWaiting are the items assigned to the user still to review
	// (pending or needing a correction), of MineAll assigned in all.
	MineWaiting, MineAll int64
	// ReadyDatasets are frozen into a version no export has written yet.
	ReadyDatasets int64
	// ActiveJobs are fine-tuning jobs that have not ended.
	ActiveJobs int64
	// OpenAlerts still hold and are not dismissed.
	OpenAlerts int64

	// Aliases are what each model's aliases name, production first.
	Aliases []db.ModelAliasListForOverviewRow
	// Deployments are queued or under way.
	Deployments []db.DeploymentListInProgressRow
	// Experiments are running or paused, each with what its analysis
	// recommends.
	Experiments []Experiment
	// Evaluations are unfinished, or failed in the last seven days.
	Evaluations []db.EvaluationRunListRunningOrFailedRow
}

// Experiment is a running or paused experiment with its recommendation
// (for a running one; a paused one says why it was paused).
type Experiment struct {
	db.ExperimentListRunningOrPausedRow
	Action, Reason string
}

// Summarize counts the organisation's waiting work, and userID's share of
// the review queue (none for uuid.Nil, as for an API key).
func (s *Service) Summarize(ctx context.Context, orgID, userID uuid.UUID) (Summary, error) {
	q := db.New(s.Pool)
	sum := Summary{ByStatus: map[string]int64{}}
	mine := map[string]int64{}
	byStatus := func(f feedback.Filter, into map[string]int64) func() error {
		return func() error {
			rows, err := q.FeedbackCountByStatus(ctx, f.CountParams(orgID))
			for _, r := range rows {
				into[string(r.Status)] = r.Count
			}
			return err
		}
	}
	count := func(read func(context.Context, uuid.UUID) (int64, error), into *int64) func() error {
		return func() (err error) {
			*into, err = read(ctx, orgID)
			return err
		}
	}
	var g errgroup.Group
	g.Go(byStatus(feedback.Filter{}, sum.ByStatus))
	if userID != uuid.Nil {
		g.Go(byStatus(feedback.Filter{Assignee: userID}, mine))
	}
	g.Go(count(q.DatasetCountReady, &sum.ReadyDatasets))
	g.Go(count(q.FineTuneJobCountActive, &sum.ActiveJobs))
	g.Go(count(q.AlertCountOpen, &sum.OpenAlerts))
	g.Go(func() (err error) { sum.Aliases, err = q.ModelAliasListForOverview(ctx, orgID); return err })
	g.Go(func() (err error) { sum.Deployments, err = q.DeploymentListInProgress(ctx, orgID); return err })
	g.Go(func() (err error) { sum.Evaluations, err = q.EvaluationRunListRunningOrFailed(ctx, orgID); return err })
	g.Go(func() (err error) { sum.Experiments, err = s.experiments(ctx, q, orgID); return err })
	if err := g.Wait(); err != nil {
		return Summary{}, err
	}
	for st, n := range mine {
		sum.MineAll += n
		if st == string(db.ReviewStatusPending) || st == string(db.ReviewStatusNeedsCorrection) {
			sum.MineWaiting += n
		}
	}
	return sum, nil
}

// experiments reads the running and paused experiments and analyses each
// running one for its recommendation.
func (s *Service) experiments(ctx context.Context, q *db.Queries, orgID uuid.UUID) ([]Experiment, error) {
	rows, err := q.ExperimentListRunningOrPaused(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Experiment, len(rows))
	var g errgroup.Group
	for i, r := range rows {
		out[i].ExperimentListRunningOrPausedRow = r
		if r.Status != db.ExperimentStatusRunning || s.Experiments == nil {
			continue
		}
		g.Go(func() error {
			res, err := s.Experiments.Results(ctx, orgID, r.Key)
			out[i].Action, out[i].Reason = res.Recommendation.Action, res.Recommendation.Reason
			return err
		})
	}
	return out, g.Wait()
}
