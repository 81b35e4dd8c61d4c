package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/web/webtest"
)

// benchExperiment starts a server with a running experiment "bench"
// between two provider models (called by their ids, so no target is
// needed), measuring metrics when given, and answers it with a curator's
// key and the experiment's id.
func benchExperiment(b *testing.B, metrics ...string) (*webtest.Server, string, uuid.UUID) {
	b.Helper()
	s := webtest.New(b, webtest.Options{Configure: func(c *config.Config) { c.APIRate, c.APIBurst = 1e9, 1e9 }})
	org := s.Org("bench")
	admin := s.APIKey(org, "ops", "admin")
	var ids []string
	for _, v := range []string{"1.0.0", "1.1.0"} {
		var mv struct {
			ID string `json:"id"`
		}
		s.API(admin, http.MethodPost, "/api/models", map[string]any{"name": "support", "version": v, "model_id": "ft:gpt-4o-mini:acme::" + v,
			"kind": "full"}).Must(b, http.StatusCreated).JSON(b, &mv)
		ids = append(ids, mv.ID)
	}
	var exp struct {
		ID uuid.UUID `json:"id"`
	}
	in := map[string]any{"key": "bench", "seed": "bench", "control_model_id": ids[0], "treatment_model_id": ids[1]}
	if metrics != nil {
		in["metrics"] = metrics
	}
	s.API(admin, http.MethodPost, "/api/models/ab-test", in).Must(b, http.StatusCreated).JSON(b, &exp)
	s.API(admin, http.MethodPost, "/api/experiments/bench/start", nil).Must(b, http.StatusOK)
	return s, s.APIKey(org, "assistant", "curator"), exp.ID
}

// minimalAssign is the floor assignment is measured against: a plain
// net/http server that decodes the unit, places it by the same hash and
// answers the arm one INSERT … ON CONFLICT … RETURNING gives, on the same
// database and pool; with unit_ids, all of them in one such statement.
func minimalAssign(b *testing.B, s *webtest.Server, expID uuid.UUID) *httptest.Server {
	b.Helper()
	weights := []float64{0.5, 0.5}
	// The exposures' partition key (migration 00180), read once.
	var phaseStart time.Time
	if err := s.Pool.QueryRow(context.Background(), `SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $1`, expID).Scan(&phaseStart); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			UnitID  string   `json:"unit_id"`
			UnitIDs []string `json:"unit_ids"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if in.UnitIDs == nil {
			var arm int
			err := s.Pool.QueryRow(r.Context(), `INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, phase_started_at) VALUES ($1, 1, $2, $3, $4)
				ON CONFLICT (experiment_id, phase, unit_id, phase_started_at) DO UPDATE SET arm = experiment_exposures.arm RETURNING arm`,
				expID, in.UnitID, experiments.Choose(experiments.Hash("bench", in.UnitID), 1, weights), phaseStart).Scan(&arm)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]int{"arm_index": arm})
			return
		}
		arms := make([]int32, len(in.UnitIDs))
		for i, u := range in.UnitIDs {
			arms[i] = int32(experiments.Choose(experiments.Hash("bench", u), 1, weights))
		}
		rows, err := s.Pool.Query(r.Context(), `INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, phase_started_at)
			SELECT $1, 1, unnest($2::text[]), unnest($3::int[]), $4
			ON CONFLICT (experiment_id, phase, unit_id, phase_started_at) DO UPDATE SET arm = experiment_exposures.arm RETURNING unit_id, arm`,
			expID, in.UnitIDs, arms, phaseStart)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		type answer struct {
			UnitID   string `json:"unit_id"`
			ArmIndex int    `json:"arm_index"`
		}
		var out []answer
		for rows.Next() {
			var a answer
			if err := rows.Scan(&a.UnitID, &a.ArmIndex); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			out = append(out, a)
		}
		if err := rows.Err(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": out})
	}))
	b.Cleanup(srv.Close)
	return srv
}

// poster posts JSON to a server through one client of benchClients
// connections, reading each answer to its end so connections are reused.
func poster(key string) func(url, body string) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients, MaxConnsPerHost: benchClients}}
	return func(url, body string) error {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: status %d", url, res.StatusCode)
		}
		return nil
	}
}

// BenchmarkAssignAPI compares POST /api/experiments/:key/assign with 32
// concurrent clients against the minimal server doing one INSERT … ON
// CONFLICT … RETURNING per request, in alternating rounds: first for new
// units (each round's units assigned for the first time), then for the
// same units again (known units). Run with -benchtime=Nx (N requests of
// each kind, at least 16,000: four rounds of 4,000, long enough that the
// slowest calls at each round's end do not decide its time). Both sides
// are warmed first, so that the rounds measure steady work: until then
// each of the pools' connections prepares its statements, and each of the
// first concurrent calls reads the experiment's configuration.
func BenchmarkAssignAPI(b *testing.B) {
	s, key, expID := benchExperiment(b)
	raw := minimalAssign(b, s, expID)
	post := poster(key)
	n := max(b.N, 16000)
	unit := func(side string, i int) string { return fmt.Sprintf(`{"unit_id":"%s-%d"}`, side, i) }
	api := s.URL + "/api/experiments/bench/assign"
	for _, warm := range []func(i int) error{
		func(i int) error { return post(api, unit("warm-api", i)) },
		func(i int) error { return post(raw.URL, unit("warm-raw", i)) },
	} {
		concurrently(0, 4*benchClients, warm)
	}
	b.ResetTimer()
	rates, p99s := inRounds(n, 4,
		func(i int) error { return post(api, unit("api", i)) },
		func(i int) error { return post(raw.URL, unit("raw", i)) },
		func(i int) error { return post(api, unit("api", i)) },
		func(i int) error { return post(raw.URL, unit("raw", i)) },
	)
	b.StopTimer()
	for k, name := range []string{"new", "raw_new", "known", "raw_known"} {
		b.ReportMetric(rates[k], name+"_req/s")
		b.ReportMetric(p99s[k], name+"_p99_ms")
	}
	b.ReportMetric(100*rates[0]/rates[1], "new_%_of_raw")
	b.ReportMetric(100*rates[2]/rates[3], "known_%_of_raw")
}

// BenchmarkAssignBatch times POST /api/experiments/:key/assign-batch of
// 1,000 new units against the minimal server assigning the same number in
// one statement, one request at a time, the two taking turns. Run with
// -benchtime=Nx (N batches each, at least 30).
func BenchmarkAssignBatch(b *testing.B) {
	s, key, expID := benchExperiment(b)
	raw := minimalAssign(b, s, expID)
	post := poster(key)
	rounds := max(b.N, 30)
	batch := func(side string, r int) string {
		ids := make([]string, experiments.MaxBatch)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s-%d-%d", side, r, i)
		}
		return mustJSON(b, map[string]any{"unit_ids": ids})
	}
	// Warm both paths: the server's copy of the configuration, the pools.
	for r := range 3 {
		if err := post(s.URL+"/api/experiments/bench/assign-batch", batch("warm-api", r)); err != nil {
			b.Fatal(err)
		}
		if err := post(raw.URL, batch("warm-raw", r)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var api, floor []time.Duration
	for r := range rounds {
		body := batch("api", r)
		start := time.Now()
		if err := post(s.URL+"/api/experiments/bench/assign-batch", body); err != nil {
			b.Fatal(err)
		}
		api = append(api, time.Since(start))
		body = batch("raw", r)
		start = time.Now()
		if err := post(raw.URL, body); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(ms(median(api)), "batch_ms")
	b.ReportMetric(ms(median(floor)), "raw_batch_ms")
	b.ReportMetric(ms(p95(api)), "batch_p95_ms")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
