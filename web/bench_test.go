package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/web/webtest"
)

// benchClients is the concurrency of the ingest comparisons.
const benchClients = 32

// BenchmarkFeedbackPost compares POST /api/feedback with 32 concurrent
// clients over loopback against its floor, a minimal server doing only
// net/http, one JSON decode and the same one-row INSERT (see
// floorFeedbackServer), driven by the same client on the same database in
// alternating rounds. Curate runs as serve runs it, its workers and their
// periodic jobs included, so that whatever they cost ingest is counted.
// Two more sides show where the time goes: a raw single-row INSERT of the
// same row, and the service's ingest called without HTTP. Each side sends
// CURATE_BENCH_POSTS requests (default 18,000: three rounds of 6,000), or
// -benchtime=Nx when larger.
func BenchmarkFeedbackPost(b *testing.B) {
	pool, dbURL := pgtest.NewDBURL(b)
	s := webtest.New(b, webtest.Options{Pool: pool, Workers: config.Defaults().Workers,
		Configure: func(c *cfgT) { c.APIRate = 1e9; c.APIBurst = 1e9; c.FeedbackPerUser = 1e9 }})
	org := s.Org("bench")
	key := s.APIKey(org, "bench", "curator")
	floorURL := floorFeedbackServer(b, dbURL, org)
	n := max(b.N, 18000)
	if v, err := strconv.Atoi(os.Getenv("CURATE_BENCH_POSTS")); err == nil && v > 0 {
		n = max(b.N, v)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: benchClients, MaxConnsPerHost: benchClients}
	client := &http.Client{Transport: tr}
	body := func(prefix string, i int) string {
		return fmt.Sprintf(`{"external_id":"%s-%d","user_id":"u%d","query":"How do I export invoice %d as PDF?","response":"Open Billing, pick the invoice and press Export.","feedback_type":"rating","rating":%d,"model":"support-v2","tags":["billing"]}`, prefix, i, i%500, i, i%5+1)
	}
	post := func(url, prefix string, auth bool) func(i int) error {
		return func(i int) error {
			req, _ := http.NewRequest(http.MethodPost, url+"/api/feedback", strings.NewReader(body(prefix, i)))
			if auth {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil {
				return err
			}
			// Read to the end, or the connection is not reused and every
			// request pays for a new one.
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusCreated {
				return fmt.Errorf("status %d", res.StatusCode)
			}
			return nil
		}
	}
	insert := func(i int) error {
		// The same row, written by a plain single-row INSERT.
		_, err := s.Pool.Exec(context.Background(), `INSERT INTO feedback
			(org_id, external_id, end_user_id, query, response, model, feedback_type, rating, tags, source, content_hash)
			VALUES ($1, $2, $3, $4, $5, 'support-v2', 'rating', $6, '{billing}', 'api', $7)`,
			org, fmt.Sprintf("raw-%d", i), fmt.Sprintf("u%d", i%500), fmt.Sprintf("How do I export invoice %d as PDF?", i),
			"Open Billing, pick the invoice and press Export.", i%5+1, feedback.ContentHash(fmt.Sprint(i), "r"))
		return err
	}
	// The service's ingest without HTTP, the code the handler calls: what
	// is left between it and the API is the HTTP and JSON path.
	svc := feedback.New(s.Pool)
	ingest := func(i int) error {
		var it feedback.Item
		if err := json.Unmarshal([]byte(body("svc", i)), &it); err != nil {
			return err
		}
		_, _, err := svc.Ingest(context.Background(), org, "api", it)
		return err
	}
	b.ResetTimer()
	rates, p99s := inRounds(n, 3, post(s.URL, "api", true), post(floorURL, "floor", false), insert, ingest)
	b.StopTimer()
	b.ReportMetric(rates[0], "api_req/s")
	b.ReportMetric(p99s[0], "api_p99_ms")
	b.ReportMetric(rates[1], "floor_req/s")
	b.ReportMetric(p99s[1], "floor_p99_ms")
	b.ReportMetric(100*rates[0]/rates[1], "api_%_of_floor")
	b.ReportMetric(p99s[0]/p99s[1], "api_p99/floor")
	b.ReportMetric(rates[2], "insert_rows/s")
	b.ReportMetric(p99s[2], "insert_p99_ms")
	b.ReportMetric(100*rates[0]/rates[2], "api_%_of_raw")
	b.ReportMetric(rates[3], "ingest_rows/s")
	b.ReportMetric(100*rates[3]/rates[2], "ingest_%_of_raw")
}

// BenchmarkFeedbackBatch compares POST /api/feedback/batch (10,000 items,
// validated, PII-scanned, COPY) against a raw COPY of the same rows.
func BenchmarkFeedbackBatch(b *testing.B) {
	s := webtest.New(b, webtest.Options{})
	org := s.Org("bench")
	key := s.APIKey(org, "bench", "curator")
	const batch = 10000
	rounds := max(b.N, 3)
	items := func(round int, prefix string) []feedback.Item {
		out := make([]feedback.Item, batch)
		for i := range out {
			r := i%5 + 1
			out[i] = feedback.Item{ExternalID: fmt.Sprintf("%s-%d-%d", prefix, round, i), UserID: fmt.Sprintf("u%d", i%700),
				Query: fmt.Sprintf("Where is setting %d in the admin console?", i), Response: "Settings live under Admin > Console > Advanced.",
				FeedbackType: "rating", Rating: &r, Model: "support-v2", Tags: []string{"settings"}}
		}
		return out
	}
	b.ResetTimer()
	var apiDur time.Duration
	for r := range rounds {
		payload := mustJSON(b, map[string]any{"items": items(r, "api")})
		start := time.Now()
		res := s.API(key, http.MethodPost, "/api/feedback/batch", rawJSON(payload))
		apiDur += time.Since(start)
		if res.Status != http.StatusOK {
			b.Fatalf("batch: %d %.300s", res.Status, res.Body)
		}
	}
	q := db.New(s.Pool)
	var rawDur time.Duration
	for r := range rounds {
		its := items(r, "raw")
		rows := make([]db.FeedbackInsertManyParams, len(its))
		for i, it := range its {
			rows[i] = rawRow(org, it)
		}
		start := time.Now()
		if _, err := q.FeedbackInsertMany(context.Background(), rows); err != nil {
			b.Fatal(err)
		}
		rawDur += time.Since(start)
	}
	b.StopTimer()
	apiRate := float64(rounds*batch) / apiDur.Seconds()
	rawRate := float64(rounds*batch) / rawDur.Seconds()
	b.ReportMetric(apiRate, "api_rows/s")
	b.ReportMetric(rawRate, "copy_rows/s")
	b.ReportMetric(100*apiRate/rawRate, "api_%_of_raw")
}

// rawRow is the row the API would store for it, built without validation,
// PII scanning or hashing beyond what the table requires.
func rawRow(org uuid.UUID, it feedback.Item) db.FeedbackInsertManyParams {
	rating := pgInt2(it.Rating)
	return db.FeedbackInsertManyParams{ID: uuid.New(), OrgID: org, ExternalID: pgText(it.ExternalID), EndUserID: it.UserID, Query: it.Query,
		Response: it.Response, Context: []byte("{}"), Model: it.Model, FeedbackType: db.FeedbackType(it.FeedbackType), Rating: rating,
		Tags: it.Tags, Source: db.FeedbackSourceApi, PiiKinds: []string{}, ContentHash: []byte("0123456789abcdef0123456789abcdef"),
		Status: db.ReviewStatusPending}
}

// inRounds runs each side over its own n items in rounds, the sides taking
// turns in every round, so background work (checkpoints, autovacuum) weighs
// on all alike. It answers each side's rate and p99 latency in ms.
func inRounds(n, rounds int, sides ...func(i int) error) (rates, p99s []float64) {
	took := make([]time.Duration, len(sides))
	lats := make([][]time.Duration, len(sides))
	for r := range rounds {
		from, to := n*r/rounds, n*(r+1)/rounds
		for k, side := range sides {
			el, lat := concurrently(from, to, side)
			took[k] += el
			lats[k] = append(lats[k], lat...)
		}
	}
	for k := range sides {
		lat := lats[k]
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		rates = append(rates, float64(n)/took[k].Seconds())
		p99s = append(p99s, float64(lat[len(lat)*99/100].Microseconds())/1000)
	}
	return rates, p99s
}

// concurrently calls fn for each i in [from, to), benchClients at a time,
// and answers the time it all took and each call's latency.
func concurrently(from, to int, fn func(i int) error) (time.Duration, []time.Duration) {
	var next atomic.Int64
	next.Store(int64(from))
	lat := make([]time.Duration, to-from)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= to {
					return
				}
				t0 := time.Now()
				if err := fn(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
				lat[i-from] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := firstErr.Load(); err != nil {
		panic(err)
	}
	return elapsed, lat
}
