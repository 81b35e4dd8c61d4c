package bestofn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/bestofn"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/rewardmodel"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/internal/serving/vllmtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// BenchmarkBestOfNRewardModel times best-of-N over four candidates scored
// by a reward model served by a vLLM pooling stand-in whose model takes
// CURATE_BENCH_RM_MS (default 20) milliseconds a request, and, in
// alternating rounds, the floor: the same four requests sent straight to
// the stand-in at once. Every round's candidates are new, so nothing
// comes from the cache. It reports both p95s and the p95 of Curate's own
// overhead, each round's best-of-N less the floor measured beside it
// (resolving the alias, the cache read and write, logging the answer).
func BenchmarkBestOfNRewardModel(b *testing.B) {
	modelTime := 20 * time.Millisecond
	if s := os.Getenv("CURATE_BENCH_RM_MS"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("CURATE_BENCH_RM_MS: %v", err)
		}
		modelTime = time.Duration(ms) * time.Millisecond
	}
	ctx := context.Background()
	pool := pgtest.NewDB(b)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "bench", "Bench")
	if err != nil {
		b.Fatal(err)
	}
	jobs, err := jobq.New(pool)
	if err != nil {
		b.Fatal(err)
	}
	policy, err := outbound.ParsePolicy("127.0.0.0/8,::1")
	if err != nil {
		b.Fatal(err)
	}
	srv := serving.New(pool, nil, &outbound.Client{Policy: policy}, "", "")
	srv.Attempts = 1
	reg := models.New(pool, jobs, srv, nil)
	rm := vllmtest.NewPooling(b, "support-rm", "/runs/7f3a/final", func(conv []vllmtest.Message) float64 {
		return float64(len(conv[len(conv)-1].Content) % 7)
	})
	rm.SetDelay(modelTime)
	actor := audit.Actor{Kind: "system", Label: "bench"}
	if _, err := srv.Create(ctx, actor, org.ID, serving.NewTarget{Name: "rm-1", Kind: serving.KindVLLMPooling, BaseURL: rm.URL}); err != nil {
		b.Fatal(err)
	}
	v, err := reg.Register(ctx, actor, org.ID, models.NewVersion{Name: "support-rm", ModelID: "/runs/7f3a/final", Kind: models.KindReward})
	if err != nil {
		b.Fatal(err)
	}
	d, err := reg.Deploy(ctx, actor, org.ID, v.ID, models.DeployRequest{Alias: "production", Target: "rm-1", Reason: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if err := reg.Advance(ctx, d.ID); err != nil {
		b.Fatal(err)
	}
	svc := bestofn.New(pool, nil, nil, reg, rewardmodel.New(pool, reg))

	const query = "My router blinks red after the storm. What should I do?"
	candidates := func(round int) []string {
		return []string{
			fmt.Sprintf("Unplug it for thirty seconds, then plug it back in (%d).", round),
			fmt.Sprintf("Check that the cable is firmly in the DSL port (%d).", round),
			fmt.Sprintf("A red light means no line signal: call your provider (%d).", round),
			fmt.Sprintf("Reset it with a paper clip, holding ten seconds (%d).", round),
		}
	}
	// The floor sends what Curate sends: one chat request per candidate,
	// all at once, on a plain client.
	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	floor := func(round int) error {
		var wg sync.WaitGroup
		errc := make(chan error, 4)
		for _, c := range candidates(round) {
			body, _ := json.Marshal(map[string]any{"model": "support-rm", "use_activation": false,
				"messages": rewardmodel.Conversation(scorers.Input{Query: query, Answer: c})})
			wg.Go(func() {
				resp, err := direct.Post(rm.URL+"/classify", "application/json", bytes.NewReader(body))
				if err != nil {
					errc <- err
					return
				}
				var out struct {
					Data []struct {
						Probs []float64 `json:"probs"`
					} `json:"data"`
				}
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || len(out.Data) != 1 {
					errc <- fmt.Errorf("floor answer: %v", err)
				}
			})
		}
		wg.Wait()
		close(errc)
		return <-errc
	}
	selectOnce := func(round int) error {
		out, err := svc.Select(ctx, actor, org.ID, bestofn.Request{Query: query, Candidates: candidates(round),
			Scorer: bestofn.Scorer{RewardModel: "support-rm", Alias: "production"}})
		if err == nil && (out.CandidatesCount != 4 || slices.ContainsFunc(out.Scores, func(c bestofn.Candidate) bool { return c.Invalid != "" })) {
			err = fmt.Errorf("round %d: %+v", round, out)
		}
		return err
	}
	// Warm both paths: connections, the statement cache.
	for i := range 5 {
		if err := floor(-1 - i); err != nil {
			b.Fatal(err)
		}
		if err := selectOnce(-1 - i); err != nil {
			b.Fatal(err)
		}
	}
	rounds := max(b.N, 200)
	curate, raw, overhead := make([]float64, 0, rounds), make([]float64, 0, rounds), make([]float64, 0, rounds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ResetTimer()
	for i := range rounds {
		t0 := time.Now()
		if err := floor(i); err != nil {
			b.Fatal(err)
		}
		f := time.Since(t0)
		t0 = time.Now()
		if err := selectOnce(i); err != nil {
			b.Fatal(err)
		}
		c := time.Since(t0)
		raw, curate, overhead = append(raw, ms(f)), append(curate, ms(c)), append(overhead, ms(c-f))
	}
	b.StopTimer()
	at := func(x []float64, q int) float64 {
		slices.Sort(x)
		return x[len(x)*q/100]
	}
	p95 := func(x []float64) float64 { return at(x, 95) }
	b.ReportMetric(4, "candidates")
	b.ReportMetric(ms(modelTime), "model_ms")
	b.ReportMetric(p95(curate), "bestofn_p95_ms")
	b.ReportMetric(p95(raw), "standin_p95_ms")
	b.ReportMetric(p95(overhead), "overhead_p95_ms")
	b.ReportMetric(at(overhead, 50), "overhead_p50_ms")
}
