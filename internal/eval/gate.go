package eval

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/leak"
	"github.com/curate/curate/internal/models"
)

// Gate is the organisation's promotion gate: what moving the production
// alias requires of a version's evaluation.
type Gate struct {
	GoldenSetVersionID uuid.UUID `json:"golden_set_version_id"`
	GoldenSet          string    `json:"golden_set"`
	MaxMeanDrop        float64   `json:"max_mean_drop"`
	RegressionMargin   float64   `json:"regression_margin"`
	MaxRegressions     int       `json:"max_regressions"`
	NoNewRedTeamFlags  bool      `json:"no_new_red_team_flags"`
	// LeakCheck requires a leak check of the version, counting runs of
	// LeakMinWords words or fewer, with no answer flagged.
	LeakCheck    bool   `json:"leak_check"`
	LeakMinWords int    `json:"leak_min_words"`
	UpdatedBy    string `json:"updated_by"`
}

// Gates keeps the organisations' promotion gates and says what a gate
// makes of a version. It needs the database alone, so the registry that
// asks it before production moves (internal/models) and the evaluation
// service that embeds it can both be built with it.
type Gates struct {
	Pool *pgxpool.Pool
}

// NewGates reads and writes the gates in pool's database.
func NewGates(pool *pgxpool.Pool) *Gates { return &Gates{Pool: pool} }

// RedTeam is the split whose new safety flags the gate refuses.
const RedTeam = "red_team"

// GetGate returns the organisation's gate; false when none is set.
func (gs *Gates) GetGate(ctx context.Context, orgID uuid.UUID) (Gate, bool, error) {
	g, err := db.New(gs.Pool).EvaluationGateGet(ctx, orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Gate{}, false, nil
	}
	if err != nil {
		return Gate{}, false, err
	}
	return Gate{GoldenSetVersionID: g.GoldenSetVersionID, GoldenSet: g.GoldenSetName, MaxMeanDrop: g.MaxMeanDrop,
		RegressionMargin: g.RegressionMargin, MaxRegressions: int(g.MaxRegressions), NoNewRedTeamFlags: g.NoNewRedTeamFlags,
		LeakCheck: g.LeakCheck, LeakMinWords: int(g.LeakMinWords), UpdatedBy: g.UpdatedByLabel}, true, nil
}

// SetGate names the golden set production deployments are judged on, and
// the rules.
func (gs *Gates) SetGate(ctx context.Context, actor audit.Actor, orgID uuid.UUID, g Gate) error {
	v := &errs.Invalid{}
	if g.GoldenSetVersionID == uuid.Nil {
		v.Add("golden_set_version_id", "choose a golden set")
	}
	unit := func(field string, x float64) {
		if math.IsNaN(x) || x < 0 || x > 1 {
			v.Add(field, "must be a number from 0 to 1")
		}
	}
	unit("max_mean_drop", g.MaxMeanDrop)
	unit("regression_margin", g.RegressionMargin)
	if g.MaxRegressions < 0 || g.MaxRegressions > 100000 {
		v.Add("max_regressions", "must be a whole number from 0 to 100000")
	}
	if g.LeakMinWords == 0 {
		g.LeakMinWords = leak.DefaultMinWords
	}
	if g.LeakMinWords < 8 || g.LeakMinWords > 1000 {
		v.Add("leak_min_words", "must be a whole number from 8 to 1000")
	}
	if err := v.Err(); err != nil {
		return err
	}
	return db.InTx(ctx, gs.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if _, err := q.GoldenSetGet(ctx, db.GoldenSetGetParams{OrgID: orgID, VersionID: g.GoldenSetVersionID}); errors.Is(err, pgx.ErrNoRows) {
			return errs.InvalidField("golden_set_version_id", "is not one of this organisation's golden sets")
		} else if err != nil {
			return err
		}
		if err := q.EvaluationGateInsertOrUpdate(ctx, db.EvaluationGateInsertOrUpdateParams{OrgID: orgID, GoldenSetVersionID: g.GoldenSetVersionID,
			MaxMeanDrop: g.MaxMeanDrop, RegressionMargin: g.RegressionMargin, MaxRegressions: int32(g.MaxRegressions),
			NoNewRedTeamFlags: g.NoNewRedTeamFlags, LeakCheck: g.LeakCheck, LeakMinWords: int32(g.LeakMinWords),
			UpdatedByLabel: actor.Label}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "evaluation_gate.set", TargetType: "evaluation_gate",
			TargetID: orgID.String(), Details: map[string]any{"golden_set_version_id": g.GoldenSetVersionID.String(),
				"max_mean_drop": g.MaxMeanDrop, "regression_margin": g.RegressionMargin, "max_regressions": g.MaxRegressions,
				"no_new_red_team_flags": g.NoNewRedTeamFlags, "leak_check": g.LeakCheck, "leak_min_words": g.LeakMinWords}})
	})
}

// RemoveGate lets production deployments go without an evaluation again.
func (gs *Gates) RemoveGate(ctx context.Context, actor audit.Actor, orgID uuid.UUID) error {
	return db.InTx(ctx, gs.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.EvaluationGateDelete(ctx, orgID); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "evaluation_gate.remove", TargetType: "evaluation_gate",
			TargetID: orgID.String()})
	})
}

// Status is what the gate says of a version: the registry asks before
// moving production (models.Gate) and shows it on the version's page.
func (gs *Gates) Status(ctx context.Context, orgID, versionID uuid.UUID) (models.GateStatus, error) {
	gate, ok, err := gs.GetGate(ctx, orgID)
	if err != nil || !ok {
		return models.GateStatus{}, err
	}
	st := models.GateStatus{Set: true, GoldenSet: gate.GoldenSet}
	q := db.New(gs.Pool)
	overrides, err := q.GateOverrideList(ctx, db.GateOverrideListParams{OrgID: orgID, VersionID: versionID})
	if err != nil {
		return st, err
	}
	for _, o := range overrides {
		st.Overrides = append(st.Overrides, models.Override{Reason: o.Reason, By: o.ActorLabel, At: o.At})
	}
	leaks := ""
	if gate.LeakCheck {
		if leaks, err = gs.leakReason(ctx, q, orgID, versionID, gate.LeakMinWords); err != nil {
			return st, err
		}
		if leaks != "" {
			st.Reasons = append(st.Reasons, leaks)
		}
	}
	cand, err := gs.latestRun(ctx, q, orgID, versionID, gate.GoldenSetVersionID)
	if err != nil {
		return st, err
	}
	if cand == nil {
		st.Reasons = append(st.Reasons, fmt.Sprintf("No finished evaluation of this version on the gate's golden set, %s.", gate.GoldenSet))
		st.Next = fmt.Sprintf("Evaluate it on %s first: production opens once its evaluation keeps up with production's.", gate.GoldenSet)
		if leaks != "" {
			st.Next += " " + leakNext(gate.LeakMinWords)
		}
		return st, nil
	}
	st.Evaluation = cand.ID
	base, err := gs.baseline(ctx, q, orgID, versionID, gate.GoldenSetVersionID)
	if err != nil {
		return st, err
	}
	// Nothing in production, or production never evaluated on the set,
	// leaves the candidate's own finished run as all there is to judge.
	if base != nil {
		items, err := q.EvaluationItemListForComparison(ctx, db.EvaluationItemListForComparisonParams{CandidateRunID: cand.ID, BaselineRunID: base.ID})
		if err != nil {
			return st, err
		}
		st.Reasons = append(st.Reasons, gateReasons(gate, *cand, *base, items)...)
	}
	switch {
	case len(st.Reasons) == 0:
	case len(st.Reasons) == 1 && leaks != "":
		st.Next = leakNext(gate.LeakMinWords)
	default:
		st.Next = "Its latest evaluation falls short of production's: improve the version and evaluate it again."
		if leaks != "" {
			st.Next += " " + leakNext(gate.LeakMinWords)
		}
	}
	return st, nil
}

// leakNext says how a version gets the leak check the gate asks for.
func leakNext(minWords int) string {
	return fmt.Sprintf("Run a leak check of it through the API, counting verbatim runs of %d words or fewer, that finds no leak.", minWords)
}

// gateReasons applies the gate's rules to a candidate's run against
// production's, item by item where both answered, and says why it fails.
func gateReasons(g Gate, cand, base db.EvaluationRun, items []db.EvaluationItemListForComparisonRow) []string {
	var reasons []string
	if cand.MeanReward.Valid && base.MeanReward.Valid && cand.MeanReward.Float64 < base.MeanReward.Float64-g.MaxMeanDrop {
		reasons = append(reasons, fmt.Sprintf("Mean reward %.3f is more than %.3f below production's %.3f.",
			cand.MeanReward.Float64, g.MaxMeanDrop, base.MeanReward.Float64))
	}
	regressions, flags := 0, 0
	for _, it := range items {
		if it.CandidateReward.Valid && it.BaselineReward.Valid && it.CandidateReward.Float64 < it.BaselineReward.Float64-g.RegressionMargin {
			regressions++
		}
		if it.Split == RedTeam && it.CandidateFlag && !it.BaselineFlag {
			flags++
		}
	}
	if regressions > g.MaxRegressions {
		reasons = append(reasons, fmt.Sprintf("%d items regress by more than %.2f against production; at most %d may.",
			regressions, g.RegressionMargin, g.MaxRegressions))
	}
	if g.NoNewRedTeamFlags && flags > 0 {
		reasons = append(reasons, fmt.Sprintf("%d red-team answers are flagged unsafe where production's were not.", flags))
	}
	return reasons
}

func (gs *Gates) latestRun(ctx context.Context, q *db.Queries, orgID, versionID, setID uuid.UUID) (*db.EvaluationRun, error) {
	r, err := q.EvaluationRunGetLatestFor(ctx, db.EvaluationRunGetLatestForParams{OrgID: orgID,
		CandidateVersionID: uuid.NullUUID{UUID: versionID, Valid: true}, GoldenSetVersionID: setID})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return &r, err
}

// leakReason is why the version's leak checks fail the gate, or "".
func (gs *Gates) leakReason(ctx context.Context, q *db.Queries, orgID, versionID uuid.UUID, minWords int) (string, error) {
	r, err := q.EvaluationRunGetLatestLeak(ctx, db.EvaluationRunGetLatestLeakParams{OrgID: orgID,
		CandidateVersionID: uuid.NullUUID{UUID: versionID, Valid: true}, MaxMinWords: int32(minWords)})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Sprintf("No finished leak check of this version counting verbatim runs of %d words or fewer.", minWords), nil
	case err != nil:
		return "", err
	case r.Leaked > 0:
		return fmt.Sprintf("%d of %d answers of its leak check reproduce training data.", r.Leaked, r.Done), nil
	}
	return "", nil
}

// baseline is production's latest run on the set, for a candidate of the
// same registered model; nil when there is none to compare with.
func (gs *Gates) baseline(ctx context.Context, q *db.Queries, orgID, versionID, setID uuid.UUID) (*db.EvaluationRun, error) {
	v, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return nil, err
	}
	a, err := q.ModelAliasGet(ctx, db.ModelAliasGetParams{OrgID: orgID, RegisteredModelID: v.RegisteredModel.ID, Alias: models.Production})
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && a.VersionID == versionID) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return gs.latestRun(ctx, q, orgID, a.VersionID, setID)
}

// MaxOverrideReason bounds an override's written reason.
const MaxOverrideReason = 2000

// Override records an admin's decision to deploy a version to production
// past a failing gate. It is audited and shown on the version for good.
func (gs *Gates) Override(ctx context.Context, actor audit.Actor, orgID, versionID uuid.UUID, reason string) error {
	v := &errs.Invalid{}
	v.Text("reason", reason, MaxOverrideReason, true)
	if err := v.Err(); err != nil {
		return err
	}
	return db.InTx(ctx, gs.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if _, err := q.ModelVersionGetForUpdate(ctx, db.ModelVersionGetForUpdateParams{OrgID: orgID, ID: versionID}); err != nil {
			return errs.NotFound(err)
		}
		if _, err := q.GateOverrideInsert(ctx, db.GateOverrideInsertParams{OrgID: orgID, VersionID: versionID, Reason: reason, ActorLabel: actor.Label}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "evaluation_gate.override", TargetType: "model_version",
			TargetID: versionID.String(), Details: map[string]any{"reason": reason}})
	})
}
