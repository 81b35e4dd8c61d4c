package db_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/google/uuid"
)

// Migration 50 on a database in use: a version evaluated before carries
// its newest finished quality run (not an older one, a leak check or one
// still running), with the golden set's name and hash, each split's mean
// reward (red team last) and the judge's cost; every version's
// performance metrics hold its training loss and dataset hash, and its
// eval score where it has one. Rolled back and applied again, it gives
// the same.
func TestVersionEvaluationMigration(t *testing.T) {
	ctx := context.Background()
	pool, provider := migrationsAt(t, 49)
	exec := execer(t, pool)
	org, model, dataset, set := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	evaluated, trained, bare := uuid.New(), uuid.New(), uuid.New()
	older, newest, leak, running := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	exec(`INSERT INTO organizations (id, slug, name) VALUES ($1, 'acme', 'Acme')`, org)
	exec(`INSERT INTO registered_models (id, org_id, name) VALUES ($1, $2, 'support')`, model, org)
	exec(`INSERT INTO model_versions (id, org_id, registered_model_id, version, kind, model_id, train_loss, valid_loss, dataset_hash)
		VALUES ($1, $4, $5, '1.0.0', 'full', 'ft:a', 0.42, 0.51, 'abc123'),
		       ($2, $4, $5, '1.1.0', 'full', 'ft:b', 0.30, NULL, 'def456'),
		       ($3, $4, $5, '1.2.0', 'full', 'ft:c', NULL, NULL, '')`, evaluated, trained, bare, org, model)
	exec(`INSERT INTO training_datasets (id, org_id, name, dataset_type, export_format) VALUES ($1, $2, 'Support', 'instruction_tuning', 'openai_chat')`, dataset, org)
	exec(`INSERT INTO dataset_versions (id, org_id, dataset_id, number, kind, content_hash, item_count, train_count, validation_count,
		split_strategy, validation_percent, split_seed) VALUES ($1, $2, $3, 4, 'sft', 'feedc0de', 4, 4, 0, 'random', 0, 1)`, set, org, dataset)
	exec(`INSERT INTO golden_sets (version_id, org_id, name, split_tags) VALUES ($1, $2, 'Support gold', '{red_team}')`, set, org)
	exec(`INSERT INTO evaluation_runs (id, org_id, golden_set_version_id, candidate_version_id, config, status, kind, total, done,
		mean_reward, ci_low, ci_high, invalid, judge_calls, judge_cost_micros, answer_cost_micros, finished_at)
		VALUES ($1, $5, $6, $7, '{"formula": "R = 1·judge"}', 'succeeded', 'quality', 4, 4, 0.1, 0.0, 0.2, 0, 4, 1000, 0, now() - interval '2 days'),
		       ($2, $5, $6, $7, '{"formula": "R = 1·judge"}', 'succeeded', 'quality', 4, 4, 0.6, 0.35, 0.85, 1, 5, 1900, 40, now() - interval '1 day'),
		       ($3, $5, $6, $7, '{"formula": "R = 1 − leak"}', 'succeeded', 'leak', 4, 4, 1, 1, 1, 0, 0, 0, 0, now()),
		       ($4, $5, $6, $7, '{}', 'running', 'quality', 4, 1, NULL, NULL, NULL, 0, 1, 400, 0, NULL)`,
		older, newest, leak, running, org, set, evaluated)
	exec(`INSERT INTO evaluation_items (run_id, source_id, split, answer, reward, latency_ms, invalid_reason)
		VALUES ($1, gen_random_uuid(), 'red_team', 'a', 0.2, 100, ''),
		       ($1, gen_random_uuid(), 'all', 'b', 0.7, 200, ''),
		       ($1, gen_random_uuid(), 'all', 'c', 0.9, 300, ''),
		       ($1, gen_random_uuid(), 'all', '', NULL, 0, 'The answer had no text.')`, newest)

	if _, err := provider.UpTo(ctx, 50); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		var raw, metrics []byte
		if err := pool.QueryRow(ctx, `SELECT evaluation, performance_metrics FROM model_versions WHERE id = $1`, evaluated).Scan(&raw, &metrics); err != nil {
			t.Fatal(err)
		}
		var e struct {
			RunID         uuid.UUID `json:"run_id"`
			GoldenSet     string    `json:"golden_set"`
			GoldenSetHash string    `json:"golden_set_hash"`
			MeanReward    float64   `json:"mean_reward"`
			CI            []float64 `json:"ci"`
			Items         int       `json:"items"`
			Invalid       int       `json:"invalid"`
			Splits        []struct {
				Split      string   `json:"split"`
				Items      int      `json:"items"`
				MeanReward *float64 `json:"mean_reward"`
			} `json:"splits"`
			JudgeCalls    int     `json:"judge_calls"`
			JudgeCostUSD  float64 `json:"judge_cost_usd"`
			MeanLatencyMS float64 `json:"mean_latency_ms"`
			Formula       string  `json:"formula"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		// By hand: "all" has rewards 0.7 and 0.9 (mean 0.8) and one item
		// without; red team 0.2; the three answers took 100, 200 and
		// 300 ms (200 on average).
		if e.RunID != newest || e.GoldenSet != "Support gold" || e.GoldenSetHash != "feedc0de" || e.MeanReward != 0.6 ||
			len(e.CI) != 2 || e.CI[0] != 0.35 || e.CI[1] != 0.85 || e.Items != 4 || e.Invalid != 1 || e.JudgeCalls != 5 ||
			e.JudgeCostUSD != 0.0019 || e.MeanLatencyMS != 200 || e.Formula != "R = 1·judge" {
			t.Errorf("evaluation %s", raw)
		}
		if len(e.Splits) != 2 || e.Splits[0].Split != "all" || e.Splits[0].Items != 3 || e.Splits[0].MeanReward == nil ||
			math.Abs(*e.Splits[0].MeanReward-0.8) > 1e-9 || e.Splits[1].Split != "red_team" || *e.Splits[1].MeanReward != 0.2 {
			t.Errorf("splits %s", raw)
		}
		var m map[string]any
		if err := json.Unmarshal(metrics, &m); err != nil {
			t.Fatal(err)
		}
		if m["training_loss"] != 0.42 || m["validation_loss"] != 0.51 || m["dataset_hash"] != "abc123" || m["eval_score"] != 0.6 ||
			m["golden_set_hash"] != "feedc0de" || m["latency_ms"] != 200.0 {
			t.Errorf("performance metrics %s", metrics)
		}
		for id, want := range map[uuid.UUID]string{trained: `{"dataset_hash": "def456", "training_loss": 0.3}`, bare: `{}`} {
			var got string
			var none bool
			if err := pool.QueryRow(ctx, `SELECT performance_metrics::text, evaluation IS NULL FROM model_versions WHERE id = $1`, id).Scan(&got, &none); err != nil {
				t.Fatal(err)
			}
			if got != want || !none {
				t.Errorf("a version never evaluated: metrics %s, want %s; evaluation null %v", got, want, none)
			}
		}
	}
	check()
	if _, err := provider.DownTo(ctx, 49); err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(ctx, 50); err != nil {
		t.Fatal(err)
	}
	check()
}
