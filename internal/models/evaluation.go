package models

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
)

// Evaluation is a version's newest finished quality evaluation as the
// registry keeps it on the version: what it was asked (the golden set, by
// name and content hash), how it scored (the mean reward with its 95%
// interval, and each split's), and what scoring cost. It is written in the
// transaction that finishes the run.
type Evaluation struct {
	RunID              uuid.UUID         `json:"run_id"`
	GoldenSetVersionID uuid.UUID         `json:"golden_set_version_id"`
	GoldenSet          string            `json:"golden_set"`
	GoldenSetHash      string            `json:"golden_set_hash"`
	MeanReward         *float64          `json:"mean_reward"`
	CI                 []float64         `json:"ci"`
	Items              int               `json:"items"`
	Invalid            int               `json:"invalid"`
	Splits             []EvaluationSplit `json:"splits"`
	JudgeCalls         int               `json:"judge_calls"`
	JudgeCostUSD       float64           `json:"judge_cost_usd"`
	AnswerCostUSD      float64           `json:"answer_cost_usd"`
	// MeanLatencyMS is the mean time the version took to answer.
	MeanLatencyMS *float64  `json:"mean_latency_ms"`
	Formula       string    `json:"formula"`
	FinishedAt    time.Time `json:"finished_at"`
}

// EvaluationSplit is one split's share of an evaluation: its items and
// their mean reward with its 95% interval (none from fewer than two
// rewards).
type EvaluationSplit struct {
	Split      string    `json:"split"`
	Items      int       `json:"items"`
	MeanReward *float64  `json:"mean_reward"`
	CI         []float64 `json:"ci"`
}

// metrics are an evaluation's figures in a version's performance metrics
// (seed 000: the eval score per version, beside the training loss and the
// dataset hash).
func (e Evaluation) metrics() map[string]any {
	out := map[string]any{"golden_set_hash": e.GoldenSetHash}
	if e.MeanReward != nil {
		out["eval_score"] = *e.MeanReward
	}
	if len(e.CI) == 2 {
		out["eval_ci"] = e.CI
	}
	if e.MeanLatencyMS != nil {
		out["latency_ms"] = *e.MeanLatencyMS
	}
	return out
}

// SetEvaluationTx records a finished evaluation on the version it
// evaluated, in the caller's transaction (the one finishing the run).
func SetEvaluationTx(ctx context.Context, tx pgx.Tx, orgID, versionID uuid.UUID, e Evaluation) error {
	q := db.New(tx)
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	metrics, err := json.Marshal(e.metrics())
	if err != nil {
		return err
	}
	return q.ModelVersionUpdateEvaluation(ctx, db.ModelVersionUpdateEvaluationParams{OrgID: orgID, ID: versionID, Evaluation: raw, Metrics: metrics})
}

// evaluationOf reads a version's stored evaluation; nil until one
// finished.
func evaluationOf(raw []byte) *Evaluation {
	if len(raw) == 0 {
		return nil
	}
	var e Evaluation
	if json.Unmarshal(raw, &e) != nil {
		return nil
	}
	if e.Splits == nil {
		e.Splits = []EvaluationSplit{}
	}
	return &e
}
