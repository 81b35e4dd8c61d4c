package eval

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/stats"
)

// RunRow is a run as lists show it.
type RunRow struct {
	ID                 uuid.UUID
	Kind               string
	Status             string
	GoldenSetVersionID uuid.UUID
	GoldenSet          string
	CandidateVersionID *uuid.UUID
	Candidate          string // "support 1.1.0", or the endpoint's name
	Judge              string // the judge's endpoint, "" when the run had none
	Done, Total        int
	Invalid            int
	MeanReward         *float64
	CI                 []float64
	CreatedBy          string
	CreatedAt          time.Time
}

// Runs lists the organisation's newest runs, of one version when versionID
// is set.
func (s *Service) Runs(ctx context.Context, orgID uuid.UUID, versionID *uuid.UUID) ([]RunRow, error) {
	p := db.EvaluationRunListParams{OrgID: orgID}
	if versionID != nil {
		p.CandidateVersionID = uuid.NullUUID{UUID: *versionID, Valid: true}
	}
	rows, err := db.New(s.Pool).EvaluationRunList(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]RunRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, runRow(db.EvaluationRunGetWithNamesRow(r)))
	}
	return out, nil
}

// RunRow reads one run of the organisation as lists show it.
func (s *Service) RunRow(ctx context.Context, orgID, runID uuid.UUID) (RunRow, error) {
	r, err := db.New(s.Pool).EvaluationRunGetWithNames(ctx, db.EvaluationRunGetWithNamesParams{OrgID: orgID, ID: runID})
	if err != nil {
		return RunRow{}, errs.NotFound(err)
	}
	return runRow(r), nil
}

func runRow(r db.EvaluationRunGetWithNamesRow) RunRow {
	row := RunRow{ID: r.ID, Kind: r.Kind, Status: string(r.Status), GoldenSetVersionID: r.GoldenSetVersionID, GoldenSet: r.GoldenSetName,
		Candidate: r.CandidateVersionLabel, Done: int(r.Done), Total: int(r.Total), Invalid: int(r.Invalid),
		CreatedBy: r.CreatedByLabel, CreatedAt: r.CreatedAt}
	var cfg Config
	if json.Unmarshal(r.Config, &cfg) == nil && cfg.Judge != nil {
		row.Judge = cfg.Judge.Endpoint
	}
	if r.CandidateVersionID.Valid {
		row.CandidateVersionID = &r.CandidateVersionID.UUID
	} else {
		row.Candidate = r.CandidateEndpoint
	}
	if r.MeanReward.Valid {
		row.MeanReward = &r.MeanReward.Float64
	}
	if r.CiLow.Valid {
		row.CI = []float64{r.CiLow.Float64, r.CiHigh.Float64}
	}
	return row
}

// Comparison sets a candidate's run against production's on the same
// golden set, item by item.
type Comparison struct {
	// BaselineRunID is production's run compared with.
	BaselineRunID               uuid.UUID
	CandidateMean, BaselineMean *float64
	// Paired counts wins, ties and losses over the items both runs
	// rewarded, a difference within Tie counting as a tie.
	Paired stats.WinsTiesLosses
	Tie    float64
	// Margin is the drop that makes a regression: the gate's, else 0.1.
	Margin      float64
	Regressions []ItemDiff
	NewFlags    []ItemDiff
	Splits      []SplitResult
}

// ItemDiff is one item of both runs.
type ItemDiff struct {
	SourceID                        uuid.UUID
	Split, Query                    string
	CandidateAnswer, BaselineAnswer string
	CandidateReward, BaselineReward *float64
}

// SplitResult is one split's mean reward in both runs.
type SplitResult struct {
	Split                       string
	Items                       int
	CandidateMean, BaselineMean *float64
}

// splitOrder sorts splits by name with the red team last, apart.
func splitOrder(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == RedTeam:
		return 1
	case b == RedTeam:
		return -1
	}
	return strings.Compare(a, b)
}

// tieMargin is the reward difference within which two answers tie.
const tieMargin = 0.01

// ErrNoBaseline is a run with nothing to compare with: its candidate is not
// a model version, or production of its model has no finished run on the
// set, or it is production itself.
var ErrNoBaseline = errors.New("no production run to compare with")

// Compare sets a run against production's newest finished run on the same
// golden set.
func (s *Service) Compare(ctx context.Context, orgID, runID uuid.UUID) (Comparison, error) {
	q := db.New(s.Pool)
	run, err := q.EvaluationRunGet(ctx, db.EvaluationRunGetParams{OrgID: orgID, ID: runID})
	if err != nil {
		return Comparison{}, errs.NotFound(err)
	}
	if run.Kind != KindQuality || !run.CandidateVersionID.Valid {
		return Comparison{}, ErrNoBaseline
	}
	base, err := s.baseline(ctx, q, orgID, run.CandidateVersionID.UUID, run.GoldenSetVersionID)
	if err != nil {
		return Comparison{}, err
	}
	if base == nil {
		return Comparison{}, ErrNoBaseline
	}
	out := Comparison{BaselineRunID: base.ID, Tie: tieMargin, Margin: 0.1}
	if g, ok, err := s.GetGate(ctx, orgID); err != nil {
		return Comparison{}, err
	} else if ok {
		out.Margin = g.RegressionMargin
	}
	if run.MeanReward.Valid {
		out.CandidateMean = &run.MeanReward.Float64
	}
	if base.MeanReward.Valid {
		out.BaselineMean = &base.MeanReward.Float64
	}
	items, err := q.EvaluationItemListForComparison(ctx, db.EvaluationItemListForComparisonParams{CandidateRunID: run.ID, BaselineRunID: base.ID})
	if err != nil {
		return Comparison{}, err
	}
	var cand, baseR []float64
	type sums struct {
		n      int
		c, b   float64
		cn, bn int
	}
	splits := map[string]*sums{}
	for _, it := range items {
		d := ItemDiff{SourceID: it.SourceID, Split: it.Split, Query: it.Query, CandidateAnswer: it.CandidateAnswer, BaselineAnswer: it.BaselineAnswer}
		sp := splits[it.Split]
		if sp == nil {
			sp = &sums{}
			splits[it.Split] = sp
		}
		sp.n++
		if it.CandidateReward.Valid {
			d.CandidateReward = &it.CandidateReward.Float64
			sp.c, sp.cn = sp.c+it.CandidateReward.Float64, sp.cn+1
		}
		if it.BaselineReward.Valid {
			d.BaselineReward = &it.BaselineReward.Float64
			sp.b, sp.bn = sp.b+it.BaselineReward.Float64, sp.bn+1
		}
		if d.CandidateReward != nil && d.BaselineReward != nil {
			cand, baseR = append(cand, *d.CandidateReward), append(baseR, *d.BaselineReward)
			if *d.CandidateReward < *d.BaselineReward-out.Margin {
				out.Regressions = append(out.Regressions, d)
			}
		}
		if it.CandidateFlag && !it.BaselineFlag {
			out.NewFlags = append(out.NewFlags, d)
		}
	}
	if out.Paired, err = stats.Paired(cand, baseR, tieMargin); err != nil {
		return Comparison{}, err
	}
	for name, sp := range splits {
		r := SplitResult{Split: name, Items: sp.n}
		if sp.cn > 0 {
			m := sp.c / float64(sp.cn)
			r.CandidateMean = &m
		}
		if sp.bn > 0 {
			m := sp.b / float64(sp.bn)
			r.BaselineMean = &m
		}
		out.Splits = append(out.Splits, r)
	}
	slices.SortFunc(out.Splits, func(a, b SplitResult) int { return splitOrder(a.Split, b.Split) })
	slices.SortFunc(out.Regressions, func(a, b ItemDiff) int {
		da, dbb := *a.BaselineReward-*a.CandidateReward, *b.BaselineReward-*b.CandidateReward
		switch {
		case da > dbb:
			return -1
		case da < dbb:
			return 1
		}
		return 0
	})
	return out, nil
}

// StartChoices is what the form starting a run offers, when the runner can
// say (Runs can; a scripted runner offers nothing).
func (s *Service) StartChoices(ctx context.Context, orgID uuid.UUID) (Choices, error) {
	if c, ok := s.Runner.(interface {
		Choices(context.Context, uuid.UUID) (Choices, error)
	}); ok {
		return c.Choices(ctx, orgID)
	}
	return Choices{}, nil
}
