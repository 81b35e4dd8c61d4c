package codebook_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/codebook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// BenchmarkCodebookRetrieve publishes a codebook of CURATE_BENCH_RULES
// rules (default 10,000) and times Retrieve (k = 5) for varied queries,
// reporting its p95 beside the p95 of the same SQL run directly, in the
// same run.
func BenchmarkCodebookRetrieve(b *testing.B) {
	n := 10000
	if s := os.Getenv("CURATE_BENCH_RULES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	pool := pgtest.NewDB(b)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "bench", "Bench")
	if err != nil {
		b.Fatal(err)
	}
	// Rules as a support codebook writes them: each about two of 120
	// subjects, with its own wording; no word in every rule.
	subjects := make([]string, 120)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("%s%s", []string{"refund", "invoice", "password", "sso", "export", "webhook", "latency", "billing",
			"seat", "calendar", "slack", "okta"}[i%12], []string{"", "s", "ing", "er", "ed", "al", "ic", "ly", "ness", "ment"}[i/12])
	}
	verbs := []string{"cite", "link", "explain", "warn about", "ask for", "point to", "mention", "confirm"}
	rules := make([]codebook.VersionRule, n)
	for i := range rules {
		a, c := subjects[i%len(subjects)], subjects[(i*7+3)%len(subjects)]
		rules[i] = codebook.VersionRule{Section: a,
			Content: fmt.Sprintf("When the user asks about %s with %s, %s article %d first.", a, c, verbs[i%len(verbs)], i)}
	}
	svc := codebook.New(pool, nil, nil)
	if _, err := svc.Import(ctx, audit.System, org.ID, "bench", rules); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE codebook_version_rules"); err != nil {
		b.Fatal(err)
	}
	var versionID string
	if err := pool.QueryRow(ctx, "SELECT id::text FROM codebook_versions ORDER BY created_at DESC LIMIT 1").Scan(&versionID); err != nil {
		b.Fatal(err)
	}
	queries := make([]string, 0, 50)
	for i := range 50 {
		queries = append(queries, fmt.Sprintf("How do I get a %s for my %s?", subjects[(i*11)%len(subjects)], subjects[(i*5+1)%len(subjects)]))
	}
	const sql = `WITH fts AS (
		SELECT position, ts_rank(search, to_tsquery('english', replace(plainto_tsquery('english', $2)::text, ' & ', ' | '))) AS rank
		FROM codebook_version_rules WHERE version_id = $1
		AND search @@ to_tsquery('english', replace(plainto_tsquery('english', $2)::text, ' & ', ' | ')) ORDER BY rank DESC LIMIT 50)
		SELECT r.rule_id, r.section, r.content, (f.rank + word_similarity($2, r.content))::float8 AS score
		FROM fts f JOIN codebook_version_rules r ON r.version_id = $1 AND r.position = f.position
		ORDER BY score DESC, r.position LIMIT 5`
	rounds := max(b.N, 100)
	var api, raw []time.Duration
	b.ResetTimer()
	for i := range rounds {
		q := queries[i%len(queries)]
		t0 := time.Now()
		_, got, err := svc.Retrieve(ctx, org.ID, "bench", q, 5)
		api = append(api, time.Since(t0))
		if err != nil || len(got) == 0 {
			b.Fatalf("retrieve %q: %d rules, %v", q, len(got), err)
		}
		t0 = time.Now()
		rows, err := pool.Query(ctx, sql, versionID, q)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
		}
		rows.Close()
		raw = append(raw, time.Since(t0))
	}
	b.StopTimer()
	p95 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)*95/100]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(n), "rules")
	b.ReportMetric(p95(api), "retrieve_p95_ms")
	b.ReportMetric(p95(raw), "sql_p95_ms")
}
