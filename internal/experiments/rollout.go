package experiments

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/stats"
)

// RolloutArgs asks a worker to look at every running rollout.
type RolloutArgs struct{}

// Kind names the job in River's table.
func (RolloutArgs) Kind() string { return "rollout_check" }

// KindAliases keeps the jobs queued under the kind's earlier name worked;
// it can go once no row of river_job has that kind.
func (RolloutArgs) KindAliases() []string { return []string{"experiment_rollouts"} }

// RolloutEvery is how often rollouts are looked at.
const RolloutEvery = time.Minute

// rolloutActor signs what the rollout does on its own.
var rolloutActor = audit.Actor{Kind: "system", Label: "rollout"}

// CheckRollouts looks at every running experiment with a rollout plan: a
// metric significantly worse in the treatment (a one-sided confidence
// sequence, valid at every look) sends all traffic back to the control and
// pauses the experiment, with the reason in the registry's history; a step
// held long enough with enough units moves to the next share; the last
// step passed deploys the treatment to production through the registry.
func (s *Service) CheckRollouts(ctx context.Context) error {
	rows, err := db.New(s.Pool).ExperimentListRunningWithRollout(ctx)
	if err != nil {
		return err
	}
	for _, e := range rows {
		if err := s.checkRollout(ctx, e); err != nil {
			return fmt.Errorf("experiment %s: %w", e.Key, err)
		}
	}
	return nil
}

// harm is the first metric significantly worse in the treatment, in words,
// or "".
func (s *Service) harm(ctx context.Context, q *db.Queries, e db.Experiment, arms int) (string, error) {
	// The units' kept values (sums.go), as results read them; the check
	// uses no covariate.
	if err := s.foldFor(ctx, e); err != nil {
		return "", err
	}
	rows, _, err := keptMoments(ctx, q, e)
	if err != nil {
		return "", err
	}
	for _, metric := range append(append([]string{}, e.Metrics...), e.Guardrails...) {
		as := armStats(rows, arms, metric, false)
		test := stats.Test{Metric: stats.MetricMean, Relative: true, Alpha: 0.05, Sequential: sequentialTuning, Alternative: stats.Less}
		if !higherIsBetter[metric] {
			test.Alternative = stats.Greater
		}
		eff, err := stats.Compare(as[0], as[1], test)
		if err != nil {
			continue // not enough data to tell yet
		}
		if hi := eff.CI[1]; hi != nil && *hi < 0 {
			return fmt.Sprintf("%s is significantly lower in the treatment (%+.1f%%; the confidence sequence ends at %+.1f%%).",
				label(metric), 100*eff.Expected, 100**hi), nil
		}
		if lo := eff.CI[0]; lo != nil && *lo > 0 {
			return fmt.Sprintf("%s is significantly higher in the treatment (%+.1f%%; the confidence sequence starts at %+.1f%%).",
				label(metric), 100*eff.Expected, 100**lo), nil
		}
	}
	return "", nil
}

// monitorBreach is the treatment version's first open production-monitor
// alert, in words, or "": a rollout treats it as a guardrail's breach.
func monitorBreach(ctx context.Context, q *db.Queries, e db.Experiment, treatment db.ExperimentArmListRow) (string, error) {
	open, err := q.AlertListOpenMonitors(ctx, db.AlertListOpenMonitorsParams{OrgID: e.OrgID, VersionID: treatment.ModelVersionID.String()})
	if err != nil || len(open) == 0 {
		return "", err
	}
	a := open[0]
	return fmt.Sprintf("the production monitor found a breach in the treatment's version %s: %s. %s", treatment.Version,
		strings.ToLower(a.Title[:1])+a.Title[1:], a.Message), nil
}

func (s *Service) checkRollout(ctx context.Context, e db.Experiment) error {
	q := db.New(s.Pool)
	arms, err := q.ExperimentArmList(ctx, e.ID)
	if err != nil || len(arms) != 2 {
		return err
	}
	step := int(e.RolloutStep)
	share := func(i int) string { return fmt.Sprintf("%.0f%%", 100*e.RolloutSteps[i]) }
	reason, err := monitorBreach(ctx, q, e, arms[1])
	if err != nil {
		return err
	}
	if reason == "" {
		if reason, err = s.harm(ctx, q, e, len(arms)); err != nil {
			return err
		}
	}
	if reason != "" {
		reason = fmt.Sprintf("Rolled back automatically at the %s step: %s", share(step), reason)
		err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
			if err := q.ExperimentArmUpdateWeight(ctx, db.ExperimentArmUpdateWeightParams{ExperimentID: e.ID, Idx: 0, Weight: 1}); err != nil {
				return err
			}
			if err := q.ExperimentArmUpdateWeight(ctx, db.ExperimentArmUpdateWeightParams{ExperimentID: e.ID, Idx: 1, Weight: 0}); err != nil {
				return err
			}
			return s.setStatus(ctx, tx, q, rolloutActor, e, Paused, "", reason)
		})
		if err != nil {
			return err
		}
		return s.Models.Traffic(ctx, rolloutActor, e.OrgID, e.RegisteredModelID, "traffic_rolled_back", e.Key, arms[1].Version, arms[0].Version, reason)
	}
	// Hold the step long enough, with enough units in each arm.
	if e.RolloutStepAt == nil || s.now().Sub(*e.RolloutStepAt) < time.Duration(e.RolloutHold.Microseconds)*time.Microsecond {
		return nil
	}
	counts, err := q.ExposureCountByArm(ctx, db.ExposureCountByArmParams{ExperimentID: e.ID, Phase: e.Phase})
	if err != nil {
		return err
	}
	units := make([]int64, 2)
	for _, c := range counts {
		if c.Arm < 2 {
			units[c.Arm] = c.Units
		}
	}
	if math.Min(float64(units[0]), float64(units[1])) < float64(e.RolloutMinUnits) {
		return nil
	}
	if step+1 < len(e.RolloutSteps) {
		next := e.RolloutSteps[step+1]
		err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
			if err := q.ExperimentArmUpdateWeight(ctx, db.ExperimentArmUpdateWeightParams{ExperimentID: e.ID, Idx: 0, Weight: 1 - next}); err != nil {
				return err
			}
			if err := q.ExperimentArmUpdateWeight(ctx, db.ExperimentArmUpdateWeightParams{ExperimentID: e.ID, Idx: 1, Weight: next}); err != nil {
				return err
			}
			if err := q.ExperimentUpdateRollout(ctx, db.ExperimentUpdateRolloutParams{ID: e.ID, RolloutStep: int32(step + 1)}); err != nil {
				return err
			}
			return audit.Record(ctx, q, rolloutActor, audit.Entry{OrgID: e.OrgID, Action: "experiment.rollout_step", TargetType: "experiment",
				TargetID: e.ID.String(), Details: map[string]any{"key": e.Key, "treatment_share": next}})
		})
		if err != nil {
			return err
		}
		return s.Models.Traffic(ctx, rolloutActor, e.OrgID, e.RegisteredModelID, "traffic_shifted", e.Key, arms[0].Version, arms[1].Version,
			fmt.Sprintf("Rollout of %s: the treatment's share goes from %s to %s; no metric is worse.", e.Key, share(step), share(step+1)))
	}
	_, err = s.FullDeploy(ctx, rolloutActor, e.OrgID, e.Key, fmt.Sprintf("Rollout of %s passed every step.", e.Key))
	return err
}
