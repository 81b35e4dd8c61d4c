package livescore_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/livescore"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/secrets"
)

// A live scorer may score with a RAG metric: faithfulness of the answer
// to the documents of the feedback's context, or of the best-of-N call
// the feedback names by trace_id when it carries none. The judge stand-in
// answers RAGAS's documented verdicts for its low-faithfulness example
// (faithfulness.md, "How It's Calculated": two claims, one supported),
// so each answer scores RAGAS's 0.5.
func TestLiveScoringRAG(t *testing.T) {
	e := setup(t, pricing.Dollars(5))
	ragas := chattest.New(func(r chattest.Request) chattest.Reply {
		if strings.Contains(r.Last(), "Split the answer") {
			return chattest.Reply{Content: `{"statements": ["Einstein was born in Germany.", "Einstein was born on 20th March 1879."]}`}
		}
		return chattest.Reply{Content: `{"statements": [{"statement": "Einstein was born in Germany.", "reason": "German-born", "verdict": 1},
			{"statement": "Einstein was born on 20th March 1879.", "reason": "The context says 14 March", "verdict": 0}]}`}
	})
	t.Cleanup(ragas.Close)
	box, err := secrets.New(strings.Repeat("k", 32))
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := outbound.ParsePolicy("127.0.0.1")
	eps := endpoints.New(e.pool, box, &outbound.Client{Policy: policy, Timeout: time.Second})
	if _, err := eps.Create(e.ctx, audit.System, e.org, endpoints.NewEndpoint{Name: "ragas", BaseURL: ragas.URL + "/v1", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	x := e.experiment(t, "rag", []string{experiments.AvgJudgeScore})

	for _, tc := range []struct {
		c     livescore.Config
		field string
	}{
		{livescore.Config{Scorer: "vibes", Endpoint: "ragas", Rate: 1}, "scorer"},
		{livescore.Config{Scorer: "answer_relevancy", Endpoint: "ragas", Rate: 1}, "embeddings_endpoint"},
		{livescore.Config{Scorer: "faithfulness", Endpoint: "ragas", Embeddings: "ragas", Rate: 1}, "embeddings_endpoint"},
	} {
		_, err := e.live.SetForExperiment(e.ctx, admin, e.org, "rag", tc.c)
		var inv *errs.Invalid
		if !errors.As(err, &inv) || inv.Fields()[0] != tc.field {
			t.Errorf("%+v: %v, want a refusal of %s", tc.c, err, tc.field)
		}
	}
	sc, err := e.live.SetForExperiment(e.ctx, admin, e.org, "rag", livescore.Config{Scorer: "faithfulness", Endpoint: "ragas", Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Scorer != "faithfulness" {
		t.Fatalf("scorer %+v", sc)
	}
	const einstein = `{"documents": ["Albert Einstein (born 14 March 1879) was a German-born theoretical physicist, widely held to be one of the greatest and most influential scientists of all time"]}`
	var selection string
	if err := e.pool.QueryRow(e.ctx, `INSERT INTO best_of_n_responses (org_id, query, context, scorer, selection, generation_method, candidates, selected, reward_score)
		VALUES ($1, 'Where and when was Einstein born?', $2, '{}', 'max', 'provided', '[]', 0, 0.5) RETURNING id::text`, e.org, einstein).Scan(&selection); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO feedback (org_id, end_user_id, experiment_id, query, response, context, trace_id, feedback_type, source, content_hash)
		VALUES ($1, 'u-1', $2, 'Where and when was Einstein born?', 'Einstein was born in Germany on 20th March 1879.', $3, '', 'thumbs_up', 'api', '\x01'),
		       ($1, 'u-2', $2, 'Where and when was Einstein born?', 'Einstein was born in Germany on 20th March 1879.', '{}', $4, 'thumbs_up', 'api', '\x02')`,
		e.org, x.ID, einstein, selection); err != nil {
		t.Fatal(err)
	}
	e.now = time.Now().Add(2 * livescore.Lag)
	if err := e.live.SampleAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.live.Score(e.ctx, sc.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	rows, err := e.pool.Query(e.ctx, `SELECT status, coalesce(score, -1), reason FROM live_scores WHERE scorer_id = $1`, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var status, reason string
		var score float64
		if err := rows.Scan(&status, &score, &reason); err != nil {
			t.Fatal(err)
		}
		n++
		if status != "scored" || math.Abs(score-0.5) > 1e-4 {
			t.Errorf("live score %s %v %q, want RAGAS's 0.5", status, score, reason)
		}
	}
	if n != 2 {
		t.Errorf("%d answers scored, want 2", n)
	}
}
