package experiments

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
)

// An experiment's results are summed from each unit's values of the
// phase, kept in experiment_unit_sums (migration 00170) rather than read
// from every answer of the experiment on each request. The values are
// made once per phase (and again when the phase's start or the CUPED
// window changes), and then only the units of the end users whose answers
// or scores changed are computed again: those that the triggers of
// migration 00170 write to experiment_sums_dirty in the same transaction as
// the change. A read folds those in first, so results are what the answers
// say now; SumsEvery folds them in the background too.

// SumsEvery is how often the background fold runs.
const SumsEvery = time.Minute

// foldPage is how many end users one statement computes again.
const foldPage = 5000

// SumsArgs asks for the fold of every organisation's changed end users.
type SumsArgs struct{}

// Kind names the job in River's table.
func (SumsArgs) Kind() string { return "experiment_sums_run" }

// InsertOpts keeps at most one fold waiting at a time.
func (SumsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByPeriod: SumsEvery}}
}

// FoldSums folds in the changed end users of every organisation, a few
// organisations at a time, until none is left; an organisation with no
// experiment's values kept just has its list emptied.
func (s *Service) FoldSums(ctx context.Context) error {
	for {
		orgs, err := db.New(s.Pool).ExperimentSumListDirtyOrgs(ctx, 50)
		if err != nil {
			return err
		}
		for _, org := range orgs {
			if err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error { return fold(ctx, q, org, nil) }); err != nil {
				return err
			}
		}
		if len(orgs) < 50 {
			return nil
		}
	}
}

// foldFor brings an experiment's kept values up to date before they are
// read: made for its current phase, with its organisation's changed end
// users folded in.
func (s *Service) foldFor(ctx context.Context, e db.Experiment) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error { return fold(ctx, q, e.OrgID, &e) })
}

// fold folds an organisation's changed end users into every experiment
// whose values are kept, inside the caller's transaction, one fold of the
// organisation at a time. Values made for a phase, start or window the
// experiment no longer has are dropped, to be made again when read; e,
// when given, has its values made now if they are not.
func fold(ctx context.Context, q *db.Queries, org uuid.UUID, e *db.Experiment) error {
	if err := q.ExperimentSumGetLock(ctx, org); err != nil {
		return err
	}
	users, err := q.ExperimentSumDeleteDirty(ctx, org)
	if err != nil {
		return err
	}
	kept, err := q.ExperimentSumListByOrg(ctx, org)
	if err != nil {
		return err
	}
	current := false
	for _, k := range kept {
		if k.Phase != k.CurrentPhase || !sameTime(k.Since, k.CurrentSince) || k.PreDays != k.CurrentPreDays {
			if err := q.ExperimentSumDelete(ctx, db.ExperimentSumDeleteParams{ExperimentID: k.ExperimentID, OrgID: org}); err != nil {
				return err
			}
			continue
		}
		if e != nil && k.ExperimentID == e.ID && k.Phase == e.Phase && sameTime(k.Since, e.PhaseStartedAt) && k.PreDays == e.CupedDays {
			current = true
		}
		for page := range slices.Chunk(users, foldPage) {
			if err := q.ExperimentUnitSumDeleteUnits(ctx, db.ExperimentUnitSumDeleteUnitsParams{ExperimentID: k.ExperimentID,
				Phase: k.Phase, UnitIds: page}); err != nil {
				return err
			}
			if err := q.ExperimentUnitSumInsertUnits(ctx, db.ExperimentUnitSumInsertUnitsParams{ExperimentID: k.ExperimentID,
				Phase: k.Phase, OrgID: org, Since: k.Since, PreDays: k.PreDays, UnitIds: page}); err != nil {
				return err
			}
		}
	}
	if e == nil || current {
		return nil
	}
	if err := q.ExperimentSumInsertOrUpdate(ctx, db.ExperimentSumInsertOrUpdateParams{ExperimentID: e.ID, OrgID: org, Phase: e.Phase,
		Since: e.PhaseStartedAt, PreDays: e.CupedDays}); err != nil {
		return err
	}
	return q.ExperimentUnitSumInsertAll(ctx, db.ExperimentUnitSumInsertAllParams{ExperimentID: e.ID, Phase: e.Phase, OrgID: org,
		Since: e.PhaseStartedAt, PreDays: e.CupedDays})
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// keptMoments are ExperimentListMetricMoments' rows (its metrics with a
// value, by arm and metric) and ExperimentCountIncidents' counts, summed
// from the phase's kept per-unit values.
func keptMoments(ctx context.Context, q *db.Queries, e db.Experiment) ([]db.ExperimentListMetricMomentsRow, []db.ExperimentCountIncidentsRow, error) {
	arms, err := q.ExperimentUnitSumListArms(ctx, db.ExperimentUnitSumListArmsParams{ExperimentID: e.ID, Phase: e.Phase})
	if err != nil {
		return nil, nil, err
	}
	var rows []db.ExperimentListMetricMomentsRow
	var incidents []db.ExperimentCountIncidentsRow
	for _, a := range arms {
		per := []struct {
			metric string
			v      [7]float64
		}{
			{ThumbsUpRate, [7]float64{a.ThumbsN, a.ThumbsSum, a.ThumbsSq, a.ThumbsPreN, a.ThumbsPreSum, a.ThumbsPreSq, a.ThumbsCross}},
			{AvgRating, [7]float64{a.RatingN, a.RatingSum, a.RatingSq, a.RatingPreN, a.RatingPreSum, a.RatingPreSq, a.RatingCross}},
			{CorrectionRate, [7]float64{a.CorrectedN, a.CorrectedSum, a.CorrectedSq, a.CorrectedPreN, a.CorrectedPreSum, a.CorrectedPreSq, a.CorrectedCross}},
			{Latency, [7]float64{a.LatencyN, a.LatencySum, a.LatencySq, a.LatencyPreN, a.LatencyPreSum, a.LatencyPreSq, a.LatencyCross}},
			{AvgAccuracy, [7]float64{a.AccuracyN, a.AccuracySum, a.AccuracySq, a.AccuracyPreN, a.AccuracyPreSum, a.AccuracyPreSq, a.AccuracyCross}},
			{AvgHelpfulness, [7]float64{a.HelpfulnessN, a.HelpfulnessSum, a.HelpfulnessSq, a.HelpfulnessPreN, a.HelpfulnessPreSum, a.HelpfulnessPreSq, a.HelpfulnessCross}},
			{AvgClarity, [7]float64{a.ClarityN, a.ClaritySum, a.ClaritySq, a.ClarityPreN, a.ClarityPreSum, a.ClarityPreSq, a.ClarityCross}},
			{AvgSafety, [7]float64{a.SafetyN, a.SafetySum, a.SafetySq, a.SafetyPreN, a.SafetyPreSum, a.SafetyPreSq, a.SafetyCross}},
			{AvgJudgeScore, [7]float64{a.JudgeN, a.JudgeSum, a.JudgeSq, a.JudgePreN, a.JudgePreSum, a.JudgePreSq, a.JudgeCross}},
		}
		for _, m := range per {
			if m.v[0] == 0 {
				continue
			}
			rows = append(rows, db.ExperimentListMetricMomentsRow{Arm: a.Arm, Metric: m.metric, N: m.v[0], Sum: m.v[1], SumSquares: m.v[2],
				PreN: m.v[3], PreSum: m.v[4], PreSumSquares: m.v[5], CrossSum: m.v[6]})
		}
		if a.Incidents > 0 {
			incidents = append(incidents, db.ExperimentCountIncidentsRow{Arm: a.Arm, Incidents: a.Incidents})
		}
	}
	slices.SortStableFunc(rows, func(x, y db.ExperimentListMetricMomentsRow) int {
		if x.Arm != y.Arm {
			return int(x.Arm - y.Arm)
		}
		switch {
		case x.Metric < y.Metric:
			return -1
		case x.Metric > y.Metric:
			return 1
		}
		return 0
	})
	return rows, incidents, nil
}
