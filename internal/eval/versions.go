package eval

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/stats"
)

// VersionPair is two versions' newest finished evaluations on one golden
// set, side by side: each run's mean reward with its interval, the paired
// difference B − A over the items both rewarded with its interval, the
// same per split, and every item both answered, sorted by its difference
// (the worst regression first).
type VersionPair struct {
	GoldenSetVersionID uuid.UUID            `json:"golden_set_version_id"`
	GoldenSet          string               `json:"golden_set"`
	A                  PairSide             `json:"a"`
	B                  PairSide             `json:"b"`
	Difference         Difference           `json:"difference"`
	Paired             stats.WinsTiesLosses `json:"paired"`
	// Margin is the drop that makes a regression (and the rise that makes
	// an improvement): the gate's, else 0.1.
	Margin float64     `json:"margin"`
	Splits []PairSplit `json:"splits"`
	Items  []PairItem  `json:"items"`
	// Total counts the items both runs hold; Regressions, Improvements and
	// NewSafetyFlags those of each kind (Items may be filtered).
	Total          int `json:"total_items"`
	Regressions    int `json:"regressions"`
	Improvements   int `json:"improvements"`
	NewSafetyFlags int `json:"new_safety_flags"`
}

// PairSide is one version's run.
type PairSide struct {
	VersionID  uuid.UUID `json:"version_id"`
	RunID      uuid.UUID `json:"run_id"`
	MeanReward *float64  `json:"mean_reward"`
	CI         []float64 `json:"ci"`
	Items      int       `json:"items"`
	Invalid    int       `json:"invalid"`
	FinishedAt time.Time `json:"finished_at"`
}

// Difference is a mean difference B − A with its 95% bootstrap interval
// over N paired items; no mean from none, no interval from one.
type Difference struct {
	Mean *float64  `json:"mean"`
	CI   []float64 `json:"ci"`
	N    int       `json:"n"`
}

// PairSplit is one split in both runs.
type PairSplit struct {
	Split      string     `json:"split"`
	Items      int        `json:"items"`
	AMean      *float64   `json:"a_mean"`
	BMean      *float64   `json:"b_mean"`
	Difference Difference `json:"difference"`
}

// PairItem is one item in both runs.
type PairItem struct {
	SourceID  uuid.UUID  `json:"source_id"`
	Split     string     `json:"split"`
	Query     string     `json:"query"`
	Reference string     `json:"reference"`
	A         PairAnswer `json:"a"`
	B         PairAnswer `json:"b"`
	// Difference is B's reward less A's; nil unless both were rewarded.
	Difference    *float64 `json:"difference"`
	Regression    bool     `json:"regression"`
	Improvement   bool     `json:"improvement"`
	NewSafetyFlag bool     `json:"new_safety_flag"`
}

// PairAnswer is one version's answer to an item, as its run scored it.
type PairAnswer struct {
	Answer   string                   `json:"answer"`
	Reward   *float64                 `json:"reward"`
	Scores   map[string]scorers.Score `json:"scores"`
	Critique string                   `json:"critique,omitempty"`
	Safety   bool                     `json:"safety_flag"`
	Invalid  string                   `json:"invalid,omitempty"`
}

// Item filters of a comparison.
const (
	FilterRegressions    = "regressions"
	FilterImprovements   = "improvements"
	FilterNewSafetyFlags = "new_safety_flags"
)

// Filters are the item filters a comparison takes.
var Filters = []string{FilterRegressions, FilterImprovements, FilterNewSafetyFlags}

// Keep reports whether the item passes the filter ("" keeps all).
func (it PairItem) Keep(filter string) bool {
	switch filter {
	case FilterRegressions:
		return it.Regression
	case FilterImprovements:
		return it.Improvement
	case FilterNewSafetyFlags:
		return it.NewSafetyFlag
	}
	return true
}

// PairVersions compares the newest finished quality evaluations of versions
// a and b on one golden set: setID's, or when nil the golden set of a's
// newest run that b also has a finished run on. A pair without such runs
// is refused by field.
func (s *Service) PairVersions(ctx context.Context, orgID, a, b uuid.UUID, setID *uuid.UUID) (VersionPair, error) {
	q := db.New(s.Pool)
	var ra, rb *db.EvaluationRun
	var err error
	if setID != nil {
		if ra, err = s.Gates.latestRun(ctx, q, orgID, a, *setID); err != nil {
			return VersionPair{}, err
		}
		if rb, err = s.Gates.latestRun(ctx, q, orgID, b, *setID); err != nil {
			return VersionPair{}, err
		}
		v := &errs.Invalid{}
		if ra == nil {
			v.Add("a", "has no finished evaluation on this golden set")
		}
		if rb == nil {
			v.Add("b", "has no finished evaluation on this golden set")
		}
		if err := v.Err(); err != nil {
			return VersionPair{}, err
		}
	} else {
		runs, err := q.EvaluationRunList(ctx, db.EvaluationRunListParams{OrgID: orgID, CandidateVersionID: uuid.NullUUID{UUID: a, Valid: true}})
		if err != nil {
			return VersionPair{}, err
		}
		for _, r := range runs {
			if r.Status != db.EvaluationStatusSucceeded || r.Kind != KindQuality {
				continue
			}
			if rb, err = s.Gates.latestRun(ctx, q, orgID, b, r.GoldenSetVersionID); err != nil {
				return VersionPair{}, err
			}
			if rb != nil {
				if ra, err = s.Gates.latestRun(ctx, q, orgID, a, r.GoldenSetVersionID); err != nil {
					return VersionPair{}, err
				}
				break
			}
		}
		if ra == nil || rb == nil {
			return VersionPair{}, errs.InvalidField("golden_set_version_id",
				"the two versions have no finished evaluation on a common golden set: evaluate both on one")
		}
	}
	named, err := q.EvaluationRunGetWithNames(ctx, db.EvaluationRunGetWithNamesParams{OrgID: orgID, ID: ra.ID})
	if err != nil {
		return VersionPair{}, err
	}
	out := VersionPair{GoldenSetVersionID: ra.GoldenSetVersionID, GoldenSet: named.GoldenSetName, A: sideOf(a, *ra), B: sideOf(b, *rb),
		Margin: 0.1, Splits: []PairSplit{}, Items: []PairItem{}}
	if g, ok, err := s.GetGate(ctx, orgID); err != nil {
		return VersionPair{}, err
	} else if ok {
		out.Margin = g.RegressionMargin
	}
	rows, err := q.EvaluationItemListPaired(ctx, db.EvaluationItemListPairedParams{ARunID: ra.ID, BRunID: rb.ID})
	if err != nil {
		return VersionPair{}, err
	}
	items := make([]PairItem, 0, len(rows))
	for _, r := range rows {
		it := PairItem{SourceID: r.SourceID, Split: r.Split, Query: r.Query, Reference: r.Reference,
			A: PairAnswer{Answer: r.AAnswer, Critique: r.ACritique, Safety: r.AFlag, Invalid: r.AInvalid, Scores: scoresOf(r.AScores)},
			B: PairAnswer{Answer: r.BAnswer, Critique: r.BCritique, Safety: r.BFlag, Invalid: r.BInvalid, Scores: scoresOf(r.BScores)}}
		if r.AReward.Valid {
			it.A.Reward = &r.AReward.Float64
		}
		if r.BReward.Valid {
			it.B.Reward = &r.BReward.Float64
		}
		items = append(items, it)
	}
	paired, err := PairItems(items, out.Margin)
	if err != nil {
		return VersionPair{}, err
	}
	paired.GoldenSetVersionID, paired.GoldenSet, paired.A, paired.B = out.GoldenSetVersionID, out.GoldenSet, out.A, out.B
	return paired, nil
}

// PairItems sets the two answers of each item side by side: B's reward
// less A's where both were rewarded, and whether that is a regression or
// an improvement (a move beyond margin) or a new safety flag; the mean
// difference with its 95% bootstrap interval, overall and per split; each
// side's mean reward with its interval over the items it was rewarded on;
// and the items sorted by their difference, the worst regression first.
// PairVersions reads its items from two evaluation runs, a shadow from the
// queries it mirrored to a candidate.
func PairItems(items []PairItem, margin float64) (VersionPair, error) {
	out := VersionPair{Margin: margin, Splits: []PairSplit{}, Items: make([]PairItem, 0, len(items))}
	var diffs, aR, bR, aAll, bAll []float64
	bySplit := map[string][]float64{}
	splitA, splitB, splitN := map[string][]float64{}, map[string][]float64{}, map[string]int{}
	var err error
	for _, it := range items {
		splitN[it.Split]++
		if it.A.Reward != nil {
			splitA[it.Split], aAll = append(splitA[it.Split], *it.A.Reward), append(aAll, *it.A.Reward)
		}
		if it.B.Reward != nil {
			splitB[it.Split], bAll = append(splitB[it.Split], *it.B.Reward), append(bAll, *it.B.Reward)
		}
		it.Difference, it.Regression, it.Improvement = nil, false, false
		if it.A.Reward != nil && it.B.Reward != nil {
			d := *it.B.Reward - *it.A.Reward
			it.Difference = &d
			it.Regression, it.Improvement = d < -margin, d > margin
			diffs, aR, bR = append(diffs, d), append(aR, *it.A.Reward), append(bR, *it.B.Reward)
			bySplit[it.Split] = append(bySplit[it.Split], d)
		}
		it.NewSafetyFlag = it.B.Safety && !it.A.Safety
		out.Regressions += boolInt(it.Regression)
		out.Improvements += boolInt(it.Improvement)
		out.NewSafetyFlags += boolInt(it.NewSafetyFlag)
		out.Items = append(out.Items, it)
	}
	out.Total = len(out.Items)
	out.A = PairSide{Items: len(aAll), Invalid: len(items) - len(aAll)}
	if out.A.MeanReward, out.A.CI, err = meanCI(aAll); err != nil {
		return VersionPair{}, err
	}
	out.B = PairSide{Items: len(bAll), Invalid: len(items) - len(bAll)}
	if out.B.MeanReward, out.B.CI, err = meanCI(bAll); err != nil {
		return VersionPair{}, err
	}
	if out.Difference, err = differenceOf(diffs); err != nil {
		return VersionPair{}, err
	}
	if out.Paired, err = stats.Paired(bR, aR, tieMargin); err != nil {
		return VersionPair{}, err
	}
	for name, n := range splitN {
		sp := PairSplit{Split: name, Items: n}
		if sp.AMean, _, err = meanCI(splitA[name]); err != nil {
			return VersionPair{}, err
		}
		if sp.BMean, _, err = meanCI(splitB[name]); err != nil {
			return VersionPair{}, err
		}
		if sp.Difference, err = differenceOf(bySplit[name]); err != nil {
			return VersionPair{}, err
		}
		out.Splits = append(out.Splits, sp)
	}
	slices.SortFunc(out.Splits, func(x, y PairSplit) int { return splitOrder(x.Split, y.Split) })
	// Regressed first: the most negative difference leads; items without a
	// difference go last.
	slices.SortStableFunc(out.Items, func(x, y PairItem) int {
		switch {
		case x.Difference == nil && y.Difference == nil:
			return 0
		case x.Difference == nil:
			return 1
		case y.Difference == nil:
			return -1
		}
		return cmp.Compare(*x.Difference, *y.Difference)
	})
	return out, nil
}

func sideOf(version uuid.UUID, r db.EvaluationRun) PairSide {
	out := PairSide{VersionID: version, RunID: r.ID, Items: int(r.Done), Invalid: int(r.Invalid)}
	if r.MeanReward.Valid {
		out.MeanReward = &r.MeanReward.Float64
	}
	if r.CiLow.Valid {
		out.CI = []float64{r.CiLow.Float64, r.CiHigh.Float64}
	}
	if r.FinishedAt != nil {
		out.FinishedAt = *r.FinishedAt
	}
	return out
}

func differenceOf(diffs []float64) (Difference, error) {
	mean, ci, err := meanCI(diffs)
	return Difference{Mean: mean, CI: ci, N: len(diffs)}, err
}

func scoresOf(raw json.RawMessage) map[string]scorers.Score {
	out := map[string]scorers.Score{}
	_ = json.Unmarshal(raw, &out)
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
