package db_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
)

// The plans PostgreSQL keeps for the statements on the hot paths and for
// the periodic work, read on a table of one organisation with planRows rows
// and again on a nearly empty one. A prepared statement is planned once and
// its generic plan kept by each connection, whatever the statistics were
// then, so each statement is read under plan_cache_mode =
// force_generic_plan: the plan that does not look at the values.
const planRows = 100_000

// queryTexts are the statements sqlc generated (db/*.sql.go), by the name
// their queries file gives them.
func queryTexts(t *testing.T) map[string]string {
	texts, _ := queryFiles(t)
	return texts
}

// queryFiles is queryTexts with the names each generated file holds.
func queryFiles(t *testing.T) (map[string]string, map[string][]string) {
	t.Helper()
	files, err := filepath.Glob("*.sql.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated query files: %v", err)
	}
	name := regexp.MustCompile(`^-- name: (\w+) :`)
	out := map[string]string{}
	byFile := map[string][]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if m := name.FindStringSubmatch(s); m != nil {
				out[m[1]] = s
				byFile[strings.TrimSuffix(f, ".sql.go")] = append(byFile[strings.TrimSuffix(f, ".sql.go")], m[1])
			}
			return true
		})
	}
	return out, byFile
}

// planFixture is a database with one organisation's feedback, an
// experiment's exposures, live scores and a codebook version's rules, all
// analysed.
type planFixture struct {
	pool                       *pgxpool.Pool
	rows                       int
	org, exp, version, scorer  uuid.UUID
	feedbackID                 uuid.UUID // one stored row
	hash                       []byte    // its content hash
	experimentRows, experiment int       // feedback rows in the experiment, and units
}

func newPlanFixture(t *testing.T, rows int) *planFixture {
	t.Helper()
	ctx := context.Background()
	f := &planFixture{pool: pgtest.NewDB(t), rows: rows, org: uuid.New(), exp: uuid.New(), version: uuid.New(), scorer: uuid.New()}
	// A hundredth of the feedback is in the experiment, from half as many
	// units; the rest is from other end users.
	f.experiment = max(rows/200, 1)
	f.experimentRows = (rows + 99) / 100
	steps := []string{
		`INSERT INTO organizations (id, slug, name) VALUES ($1, 'plans', 'Plans')`,
		`INSERT INTO registered_models (id, org_id, name) VALUES ($2, $1, 'support')`,
		`INSERT INTO model_versions (org_id, registered_model_id, version, kind, model_id)
		 VALUES ($1, $2, '1.0.0', 'full', 'm-1'), ($1, $2, '1.1.0', 'full', 'm-2')`,
		`INSERT INTO experiments (id, org_id, key, name, registered_model_id, seed, status, started_at, metrics)
		 VALUES ($3, $1, 'plans', 'Plans', $2, 'plans', 'running', now() - interval '30 days', '{thumbs_up,rating}')`,
		`INSERT INTO experiment_arms (experiment_id, idx, name, model_version_id, weight)
		 SELECT $3, row_number() OVER (ORDER BY version) - 1, version, id, 0.5 FROM model_versions WHERE org_id = $1`,
		`INSERT INTO feedback (org_id, query, response, model, feedback_type, rating, status, source, content_hash,
		                       end_user_id, session_id, comment, experiment_id, experiment_arm, created_at, reviewed_at)
		 SELECT $1, 'How do I configure feature ' || i || '?', 'Open Settings and choose ' || i || '.',
		        (ARRAY['support-v1','support-v2','triage-v1'])[1 + i % 3],
		        (ARRAY['thumbs_up','thumbs_down','rating']::feedback_type[])[1 + i % 3], 1 + i % 5,
		        (ARRAY['pending','pending','approved','rejected','corrected']::review_status[])[1 + (i * 7) % 5],
		        'api', sha256(i::text::bytea), CASE WHEN i % 100 = 0 THEN 'u' || (i % ($5::int)) ELSE 'v' || (i % 5000) END, 's' || (i / 20),
		        CASE WHEN i % 7 = 0 THEN 'The answer about feature ' || (i % 100) || ' was out of date.' ELSE '' END,
		        CASE WHEN i % 100 = 0 THEN $3::uuid END, CASE WHEN i % 100 = 0 THEN (ARRAY['1.0.0','1.1.0'])[1 + i % 2] ELSE '' END,
		        now() - (i * (2592000.0 / $4::int)) * interval '1 second',
		        CASE WHEN (i * 7) % 5 >= 2 THEN now() - (i * (2592000.0 / $4::int)) * interval '1 second' END
		 FROM generate_series(1, $4::int) AS i`,
		`INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at)
		 SELECT $3, 1, 'u' || i, i % 2, now() - interval '30 days', (SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $3)
		 FROM generate_series(0, $5::int - 1) AS i`,
		// An earlier experiment of the organisation, with as many units as
		// the table has rows.
		`INSERT INTO experiments (id, org_id, key, name, registered_model_id, seed, status, started_at)
		 VALUES ($8, $1, 'earlier', 'Earlier', $2, 'earlier', 'completed', now() - interval '90 days')`,
		`INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at)
		 SELECT $8, 1, 'e' || i, i % 2, now() - interval '90 days', (SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $8)
		 FROM generate_series(1, $4::int) AS i`,
		`INSERT INTO experiment_sums (experiment_id, org_id, phase, pre_days) VALUES ($3, $1, 1, 14)`,
		`INSERT INTO experiment_unit_sums (experiment_id, phase, unit_id, arm, y_thumbs, y_rating, y_corrected, y_latency)
		 SELECT experiment_id, phase, unit_id, arm, arm, 1 + arm, 0, 300 FROM experiment_exposures
		 WHERE experiment_id = $3 AND unit_id !~ '^u[0-9]$'`, // u0 to u9 are folded in by a test
		`INSERT INTO live_scorers (id, org_id, experiment_id, endpoint, rate) VALUES ($6, $1, $3, 'http://scorer.invalid', 1)`,
		`INSERT INTO live_scores (scorer_id, feedback_id, org_id, status, score, created_at, feedback_at)
		 SELECT $6, id, org_id, CASE WHEN seq % 100 = 0 THEN 'pending' ELSE 'scored' END,
		        CASE WHEN seq % 100 = 0 THEN NULL ELSE (seq % 10) / 10.0 END, created_at, created_at
		 FROM feedback WHERE org_id = $1`,
		`INSERT INTO codebooks (id, org_id, name) VALUES ($7, $1, 'support')`,
		`INSERT INTO codebook_versions (id, org_id, codebook_id, version, content_hash) VALUES ($7, $1, $7, 1, 'h')`,
		`INSERT INTO codebook_version_rules (version_id, position, rule_id, section, content)
		 SELECT $7, i, gen_random_uuid(), 'Section ' || (i % 20),
		        'When asked about ' || (ARRAY['billing','invoices','refunds','passwords','exports','webhooks','quotas','teams','tokens','audits'])[1 + i % 10]
		        || ' in topic' || i || ', answer with the policy of plan' || (i % 37) || '.'
		 FROM generate_series(1, greatest($4::int / 100, 3)) AS i`,
		`ANALYZE`,
	}
	args := []any{f.org, uuid.New(), f.exp, rows, f.experiment, f.scorer, f.version, uuid.New()}
	for _, s := range steps {
		for i := len(args); i > 0; i-- {
			s = strings.ReplaceAll(s, fmt.Sprintf("$%d", i), literal(args[i-1]))
		}
		if _, err := f.pool.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := f.pool.QueryRow(ctx, `SELECT id, content_hash FROM feedback WHERE org_id = $1 ORDER BY seq LIMIT 1`, f.org).Scan(&f.feedbackID, &f.hash); err != nil {
		t.Fatal(err)
	}
	return f
}

// literal writes v as an SQL literal for EXECUTE's arguments (the prepared
// statement gives it its type).
func literal(v any) string {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return quote(v)
	case uuid.UUID:
		return quote(v.String()) + "::uuid"
	case []byte:
		return quote(`\x` + hex.EncodeToString(v))
	case [][]byte:
		parts := make([]string, len(v))
		for i, b := range v {
			parts[i] = `"\\x` + hex.EncodeToString(b) + `"`
		}
		return quote("{" + strings.Join(parts, ",") + "}")
	case []string:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
		}
		return quote("{" + strings.Join(parts, ",") + "}")
	case []int:
		parts := make([]string, len(v))
		for i, n := range v {
			parts[i] = strconv.Itoa(n)
		}
		return quote("{" + strings.Join(parts, ",") + "}")
	case time.Time:
		return quote(v.Format(time.RFC3339Nano))
	case bool, int, int32, int64, float64:
		return fmt.Sprint(v)
	}
	panic(fmt.Sprintf("literal: %T", v))
}

// planNode is one node of EXPLAIN (FORMAT JSON)'s plan.
type planNode map[string]any

func (n planNode) children() []planNode {
	var out []planNode
	kids, _ := n["Plans"].([]any)
	for _, k := range kids {
		if m, ok := k.(map[string]any); ok {
			out = append(out, planNode(m))
		}
	}
	return out
}

func (n planNode) num(key string) float64 {
	v, _ := n[key].(float64)
	return v
}

// String is the plan in short, one node a line.
func (n planNode) String() string {
	var b strings.Builder
	var write func(p planNode, depth int)
	write = func(p planNode, depth int) {
		fmt.Fprintf(&b, "%s%v", strings.Repeat("  ", depth), p["Node Type"])
		if rel, ok := p["Relation Name"].(string); ok {
			fmt.Fprintf(&b, " on %s", rel)
		}
		if idx, ok := p["Index Name"].(string); ok {
			fmt.Fprintf(&b, " using %s", idx)
		}
		fmt.Fprintf(&b, " (cost %.0f, rows %.0f, loops %.0f", p.num("Total Cost"), p.num("Actual Rows"), p.num("Actual Loops"))
		if r := p.num("Rows Removed by Filter"); r > 0 {
			fmt.Fprintf(&b, ", removed by filter %.0f", r)
		}
		b.WriteString(")\n")
		for _, k := range p.children() {
			write(k, depth+1)
		}
	}
	write(n, 0)
	return b.String()
}

// walk calls fn for n and every node below it.
func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, k := range n.children() {
		k.walk(fn)
	}
}

// read is the number of table rows the plan looked at: each scan's rows,
// those its filter and its index recheck removed included, on every loop.
func (n planNode) read() (total float64, by map[string]float64) {
	by = map[string]float64{}
	n.walk(func(p planNode) {
		rel := partitioned(p["Relation Name"])
		if rel == "" || p["Node Type"] == "ModifyTable" {
			return
		}
		r := (p.num("Actual Rows") + p.num("Rows Removed by Filter") + p.num("Rows Removed by Index Recheck")) * max(p.num("Actual Loops"), 1)
		total += r
		by[rel] += r
	})
	return total, by
}

// monthPartition is the name of a month's or the DEFAULT partition of a
// table partitioned by month (migration 00140).
var monthPartition = regexp.MustCompile(`^(feedback|live_scores|experiment_exposures)_(y[0-9]{4}m[0-9]{2}|default)$`)

// partitioned is the table a plan node's relation belongs to: a
// partition's parent, any other relation itself.
func partitioned(rel any) string {
	name, _ := rel.(string)
	if m := monthPartition.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return name
}

// seqScans are the tables among tables the plan reads whole.
func (n planNode) seqScans(tables ...string) []string {
	var out []string
	n.walk(func(p planNode) {
		rel := partitioned(p["Relation Name"])
		if p["Node Type"] == "Seq Scan" {
			for _, t := range tables {
				if rel == t {
					out = append(out, rel)
				}
			}
		}
	})
	return out
}

// genericPlan prepares sql on one connection and explains its generic plan
// for args (all NULL when args is nil), inside a transaction that is rolled
// back, so a write explained with ANALYZE changes nothing.
func genericPlan(t *testing.T, pool *pgxpool.Pool, sql string, analyze bool, args []any, settings ...string) planNode {
	t.Helper()
	return preparedPlan(t, pool, "force_generic_plan", sql, analyze, args, settings...)
}

// preparedPlan is genericPlan under the plan cache mode given: the
// custom plan made for the values with force_custom_plan.
func preparedPlan(t *testing.T, pool *pgxpool.Pool, mode, sql string, analyze bool, args []any, settings ...string) planNode {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, set := range append([]string{"plan_cache_mode = " + mode}, settings...) {
		if _, err := tx.Exec(ctx, "SET LOCAL "+set); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, "PREPARE plan_under_test AS "+sql); err != nil {
		t.Fatalf("prepare: %v\n%s", err, sql)
	}
	defer func() { _, _ = pool.Exec(ctx, "DEALLOCATE ALL") }()
	if args == nil {
		var n int
		if err := tx.QueryRow(ctx, "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'plan_under_test'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		args = make([]any, n)
	}
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = literal(a)
	}
	exec := "EXECUTE plan_under_test"
	if len(lits) > 0 {
		exec += "(" + strings.Join(lits, ", ") + ")"
	}
	opts := "FORMAT JSON"
	if analyze {
		opts = "ANALYZE, " + opts
	}
	var out []byte
	if err := tx.QueryRow(ctx, "EXPLAIN ("+opts+") "+exec).Scan(&out); err != nil {
		t.Fatalf("explain: %v\n%s", err, sql)
	}
	if _, err := tx.Exec(ctx, "DEALLOCATE plan_under_test"); err != nil {
		t.Fatal(err)
	}
	var doc []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc) != 1 {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	return doc[0].Plan
}

// checkReads runs sql's generic plan with args and fails when it reads
// more than perRow table rows for each row it answers (or for each of need,
// the rows the statement has to read to answer: an aggregate's input),
// and slack rows more.
func checkReads(t *testing.T, pool *pgxpool.Pool, mode, sql string, args []any, perRow, need, slack int, settings ...string) {
	t.Helper()
	p := preparedPlan(t, pool, mode, sql, true, args, settings...)
	returned := p.num("Actual Rows")
	read, by := p.read()
	limit := float64(perRow)*max(returned, float64(need), 1) + float64(slack)
	if read > limit {
		t.Errorf("read %.0f rows (%v) to answer %.0f (at most %.0f): plan\n%s", read, by, returned, limit, p.String())
	}
}

// functionStatement is the one statement the plpgsql function name runs
// (RETURN QUERY or RETURN), with its arguments replaced by params, and the
// settings the function runs under (SET clauses).
func functionStatement(t *testing.T, pool *pgxpool.Pool, name string, params ...string) (string, []string) {
	t.Helper()
	var src string
	var settings []string
	if err := pool.QueryRow(context.Background(), `SELECT prosrc, coalesce(proconfig, '{}') FROM pg_proc WHERE proname = $1`, name).Scan(&src, &settings); err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)RETURN (?:QUERY\s+)?(.*?);\s*END`).FindStringSubmatch(src)
	if body == nil {
		t.Fatalf("%s's statement not found in\n%s", name, src)
	}
	return strings.NewReplacer(params...).Replace(body[1]), settings
}

// phaseStart is the fixture experiment's phase start, its exposures'
// partition key (migration 00180).
func phaseStart(t *testing.T, f *planFixture) time.Time {
	t.Helper()
	var at time.Time
	if err := f.pool.QueryRow(context.Background(), `SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $1`, f.exp).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// hotStatement is one statement of a hot path and the arguments it is
// explained with.
type hotStatement struct {
	name   string
	sql    func(f *planFixture) string
	args   func(f *planFixture) []any
	perRow int
	need   func(f *planFixture) int // rows the answer is made of, when more than it returns
	// settings the statement is planned under (a function's SET clauses).
	settings func(f *planFixture) []string
	// custom: PostgreSQL plans the statement for its values on every call
	// (its generic plan costs more than those; the test holds it so).
	custom bool
}

func TestPlans(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("loads 100,000 rows; -short leaves it out outside CI")
	}
	texts := queryTexts(t)
	query := func(name string) func(*planFixture) string {
		s, ok := texts[name]
		if !ok {
			t.Fatalf("no query %s", name)
		}
		return func(*planFixture) string { return s }
	}
	big, small := newPlanFixture(t, planRows), newPlanFixture(t, 3)
	newHashes := func(n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			h := sha256.Sum256([]byte(uuid.NewString()))
			out[i] = h[:]
		}
		return out
	}
	units := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return out
	}
	// The duplicate lookup FeedbackInsert calls (feedback_first_id).
	lookup := func(f *planFixture) string {
		sql, _ := functionStatement(t, f.pool, "feedback_first_id", "p_org_id", "$1::uuid", "p_content_hash", "$2::bytea")
		return "SELECT " + strings.TrimPrefix(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(sql, "("), ")")), "SELECT ")
	}
	lookupSettings := func(f *planFixture) []string {
		_, settings := functionStatement(t, f.pool, "feedback_first_id")
		return settings
	}
	hot := []hotStatement{
		{name: "ingest: a new item", sql: query("FeedbackInsert"), perRow: 3, args: func(f *planFixture) []any {
			return []any{uuid.New(), f.org, "ext-new", "", "", "", "A new question?", "A new answer.", "{}", "support-v1", "",
				"thumbs_up", nil, nil, nil, nil, nil, "", "", nil, []string{}, "api", nil, "", []string{}, newHashes(1)[0], "pending", nil, nil, false, true, "", nil, nil}
		}},
		{name: "ingest: a duplicate", sql: query("FeedbackInsert"), perRow: 3, args: func(f *planFixture) []any {
			return []any{uuid.New(), f.org, nil, "", "", "", "Again?", "Again.", "{}", "support-v1", "",
				"thumbs_up", nil, nil, nil, nil, nil, "", "", nil, []string{}, "api", nil, "", []string{}, f.hash, "pending", nil, nil, false, true, "", nil, nil}
		}},
		{name: "ingest: the duplicate lookup", perRow: 3, sql: func(f *planFixture) string { return lookup(f) },
			settings: lookupSettings, args: func(f *planFixture) []any { return []any{f.org, newHashes(1)[0]} }},
		{name: "ingest: the duplicate lookup of a duplicate", perRow: 3, sql: func(f *planFixture) string { return lookup(f) },
			settings: lookupSettings, args: func(f *planFixture) []any { return []any{f.org, f.hash} }},
		{name: "ingest: a resent external id", sql: query("FeedbackGetByExternalID"), perRow: 3, args: func(f *planFixture) []any {
			return []any{f.org, "ext-new"}
		}},
		{name: "batch ingest: stored external ids", sql: query("FeedbackListExternalIDs"), perRow: 3, need: func(*planFixture) int { return 100 },
			args: func(f *planFixture) []any { return []any{f.org, units("ext-", 100)} }},
		{name: "batch ingest: first rows by hash", sql: query("FeedbackListFirstByHash"), perRow: 3, need: func(*planFixture) int { return 100 },
			args: func(f *planFixture) []any { return []any{f.org, append(newHashes(99), f.hash)} }},
		{name: "assign: configuration", sql: query("ExperimentConfigGet"), perRow: 3, args: func(f *planFixture) []any { return []any{f.org, "plans"} }},
		{name: "assign: configuration's count of changes", sql: query("ExperimentConfigGetVersion"), perRow: 3,
			args: func(f *planFixture) []any { return []any{f.org, "plans"} }},
		{name: "assign: new and known units", sql: func(f *planFixture) string {
			sql, _ := functionStatement(t, f.pool, "experiment_assign", "p_experiment_id", "$1::uuid", "p_org_id", "$2::uuid", "p_phase", "$3::int",
				"p_unit_ids", "$4::text[]", "p_arms", "$5::int[]", "p_config_version", "$6::bigint")
			return sql
		}, settings: func(f *planFixture) []string {
			_, settings := functionStatement(t, f.pool, "experiment_assign")
			return settings
		}, perRow: 3,
			need: func(*planFixture) int { return 20 }, args: func(f *planFixture) []any {
				u := append(units("new-", 10), units("u", 10)...)
				arms := make([]int, len(u))
				return []any{f.exp, f.org, 1, u, arms, 3}
			}},
		{name: "assign: a new unit", sql: query("ExposureInsertAssignedOne"), perRow: 3, args: func(f *planFixture) []any {
			return []any{f.exp, 1, "new-one", f.org, 0, 3}
		}},
		{name: "assign: a known unit", sql: query("ExposureInsertAssignedOne"), perRow: 3, args: func(f *planFixture) []any {
			return []any{f.exp, 1, "u0", f.org, 0, 3}
		}},
		// The lookup ExposureInsertAssignedOne calls (experiment_exposure_arm),
		// read under the function's settings.
		{name: "assign: a known unit's lookup", perRow: 3, sql: func(f *planFixture) string {
			sql, _ := functionStatement(t, f.pool, "experiment_exposure_arm", "p_experiment_id", "$1::uuid", "p_phase_started_at", "$4::timestamptz",
				"p_phase", "$2::int", "p_unit_id", "$3::text")
			return "SELECT " + strings.TrimPrefix(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(sql, "("), ")")), "SELECT ")
		}, settings: func(f *planFixture) []string {
			_, settings := functionStatement(t, f.pool, "experiment_exposure_arm")
			return settings
		}, args: func(f *planFixture) []any { return []any{f.exp, 1, "u0", phaseStart(t, f)} }},
		// Feedback sent with an experiment's key is attributed to the
		// unit's arm in its newest phase.
		{name: "ingest with an experiment: the unit's exposure", perRow: 3, sql: func(f *planFixture) string {
			sql, _ := functionStatement(t, f.pool, "experiment_exposure_latest", "p_experiment_id", "$1::uuid", "p_unit_id", "$2::text")
			return sql
		}, settings: func(f *planFixture) []string {
			_, settings := functionStatement(t, f.pool, "experiment_exposure_latest")
			return settings
		}, args: func(f *planFixture) []any { return []any{f.exp, "u5"} }},
		{name: "queue: first page", sql: query("FeedbackList"), perRow: 3, custom: true, args: func(f *planFixture) []any { return filterArgs{}.list(f.org, 51) }},
		{name: "queue: first page by status", sql: query("FeedbackList"), perRow: 3, custom: true,
			args: func(f *planFixture) []any { return filterArgs{status: "pending"}.list(f.org, 51) }},
		{name: "codebook retrieval", sql: query("CodebookVersionRuleListRelevant"), perRow: 3, need: func(*planFixture) int { return 50 },
			args: func(f *planFixture) []any { return []any{"Where are my refunds for topic12?", f.version, 5} }},
		// Results sum the units' kept values (migration 00170): one row
		// read per unit of the phase, none of its answers.
		{name: "results: the units' kept values", sql: query("ExperimentUnitSumListArms"), perRow: 1,
			need: func(f *planFixture) int { return f.experiment }, args: func(f *planFixture) []any { return []any{f.exp, 1} }},
		// Before they are read, the end users whose answers changed are
		// folded in: each unit's answers and their scores read by lookups.
		{name: "results: folding in changed end users", sql: query("ExperimentUnitSumInsertUnits"), perRow: 3,
			// Of u0 to u9, only u0 has answers: one in 500 of the table's.
			need: func(f *planFixture) int { return 10 + f.rows/500 }, args: func(f *planFixture) []any {
				return []any{f.exp, 1, f.org, nil, 14, units("u", 10)}
			}},
	}
	for _, s := range hot {
		for _, f := range []*planFixture{big, small} {
			t.Run(fmt.Sprintf("%s/%d rows", s.name, f.rows), func(t *testing.T) {
				need := 0
				if s.need != nil {
					need = s.need(f)
				}
				// The configuration's few rows (an experiment, its arms)
				// are read beside the answer's.
				perRow, slack := s.perRow, 10
				if f.rows < 10 {
					// Nearly empty: a table of a few rows may be read
					// whole, once a unit; the plan is made again when the
					// statistics say the table has grown.
					perRow = max(perRow, 5)
				}
				mode := "force_generic_plan"
				if s.custom {
					// PostgreSQL keeps a generic plan only when it costs no
					// more than the custom plans it made for the values
					// (plancache.c's choose_custom_plan, which also adds
					// each custom plan's planning to its cost). This
					// statement's generic plan costs more, so each call is
					// planned for its values, and that plan is checked.
					sql, args := s.sql(f), s.args(f)
					generic := preparedPlan(t, f.pool, "force_generic_plan", sql, false, args).num("Total Cost")
					custom := preparedPlan(t, f.pool, "force_custom_plan", sql, false, args).num("Total Cost")
					if generic <= custom {
						t.Errorf("the generic plan costs %.0f, no more than the custom plan's %.0f: it would be kept", generic, custom)
					}
					mode = "force_custom_plan"
				}
				var settings []string
				if s.settings != nil {
					settings = s.settings(f)
				}
				checkReads(t, f.pool, mode, s.sql(f), s.args(f), perRow, need, slack, settings...)
			})
		}
	}

	// A connection's plan made while the table was nearly empty, run after
	// planRows rows came in with no ANALYZE between (the statistics are
	// still the empty table's): the ingest's duplicate lookup and the
	// single unit's assignment, planned as their functions are, still read
	// a few rows.
	ctx := context.Background()
	conn, err := small.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var kept []hotStatement
	for _, s := range hot {
		switch s.name {
		case "ingest: the duplicate lookup", "ingest: the duplicate lookup of a duplicate", "assign: a new unit", "assign: a known unit",
			"assign: a known unit's lookup", "ingest with an experiment: the unit's exposure":
			kept = append(kept, s)
		}
	}
	if len(kept) != 6 {
		t.Fatalf("kept plans: %d statements", len(kept))
	}
	explain := func(i int, s hotStatement) planNode {
		t.Helper()
		lits := make([]string, 0)
		for _, a := range s.args(small) {
			lits = append(lits, literal(a))
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if s.settings != nil {
			for _, set := range s.settings(small) {
				if _, err := tx.Exec(ctx, "SET LOCAL "+set); err != nil {
					t.Fatal(err)
				}
			}
		}
		var out []byte
		if err := tx.QueryRow(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE kept_%d(%s)", i, strings.Join(lits, ", "))).Scan(&out); err != nil {
			t.Fatal(err)
		}
		var doc []struct {
			Plan planNode `json:"Plan"`
		}
		if err := json.Unmarshal(out, &doc); err != nil || len(doc) != 1 {
			t.Fatalf("plan: %v\n%s", err, out)
		}
		return doc[0].Plan
	}
	// No ANALYZE comes between (a change of the tables' settings would
	// make the plans again, so it comes first).
	if _, err := small.pool.Exec(ctx, `DO $$
		DECLARE p regclass;
		BEGIN
			FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'feedback'::regclass LOOP
				EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', p);
			END LOOP;
			FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'experiment_exposures'::regclass LOOP
				EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', p);
			END LOOP;
		END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	for i, s := range kept {
		if _, err := conn.Exec(ctx, fmt.Sprintf("PREPARE kept_%d AS %s", i, s.sql(small))); err != nil {
			t.Fatal(err)
		}
		explain(i, s) // planned now, on the nearly empty table
	}
	if _, err := small.pool.Exec(ctx, `INSERT INTO feedback (org_id, query, response, feedback_type, source, content_hash, created_at)
		SELECT $1, 'Question ' || i, 'Answer ' || i, 'thumbs_up', 'api', sha256(('grown ' || i)::bytea), now() - i * interval '1 second'
		FROM generate_series(1, $2::int) AS i`, small.org, planRows); err != nil {
		t.Fatal(err)
	}
	if _, err := small.pool.Exec(ctx, `INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, phase_started_at)
		SELECT $1, 1, 'grown-' || i, i % 2, (SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $1) FROM generate_series(1, $2::int) AS i`, small.exp, planRows); err != nil {
		t.Fatal(err)
	}
	for i, s := range kept {
		t.Run(s.name+"/planned on a nearly empty table", func(t *testing.T) {
			p := explain(i, s)
			read, by := p.read()
			if returned := p.num("Actual Rows"); read > 3*max(returned, 1)+10 {
				t.Errorf("read %.0f rows (%v) to answer %.0f: plan\n%s", read, by, returned, p.String())
			}
		})
	}
}

// periodicAreas are the queries files of the work River runs on a timer
// (jobs/client.go's periodic jobs): alerts and the monitors they evaluate,
// feedback hygiene, routing, live scoring and the loops' triggers. Every
// query in them is checked, those the pages run too.
var periodicAreas = []string{"alerts", "monitors", "hygiene", "routing", "livescore", "loops"}

// periodicQueries are the rest of what the periodic jobs run: the
// rollout's step and the fold of the results' kept values (experiments), maintenance (sign-in records, sessions,
// uploads, stored facts) and the heartbeat sweep.
var periodicQueries = []string{
	"ExperimentListRunningWithRollout", "ExperimentArmList", "ExperimentArmUpdateWeight", "ExperimentUnitSumListArms", "ExperimentUnitSumInsertAll",
	"ExperimentSumListDirtyOrgs", "ExperimentSumDeleteDirty", "ExperimentSumListByOrg", "ExperimentUnitSumDeleteUnits", "ExperimentUnitSumInsertUnits",
	"ExperimentUpdateRollout", "ExposureCountByArm", "AlertListOpenMonitors",
	"LoginFailureDeleteExpired", "SessionDeleteExpired", "ItemFactsDeleteExpired",
	"JobUpdateStale", "JobHeartbeatDeleteOrphans",
	// Retention, in the maintenance job.
	"FeedbackGetOldest", "FeedbackKeyDeleteRange", "FeedbackDeleteRange", "ExposureDeleteExpired",
}

// TestPeriodicPlans: on a table of planRows rows, every query of the
// periodic work that reads feedback, exposures or live scores has a plan
// that reads them by an index. Sequential scans are priced out, so one that
// stays in the plan is one no index can replace; the statements are
// explained (not run) with the plan kept for any values.
func TestPeriodicPlans(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("loads 100,000 rows; -short leaves it out outside CI")
	}
	texts, byFile := queryFiles(t)
	names := append([]string(nil), periodicQueries...)
	for _, a := range periodicAreas {
		if len(byFile[a]) == 0 {
			t.Fatalf("no queries in %s.sql.go", a)
		}
		names = append(names, byFile[a]...)
	}
	f := newPlanFixture(t, planRows)
	watched := []string{"feedback", "experiment_exposures", "live_scores"}
	checked := 0
	for _, n := range names {
		sql, ok := texts[n]
		if !ok {
			t.Fatalf("no query %s", n)
		}
		if !regexp.MustCompile(`\b(feedback|experiment_exposures|live_scores)\b`).MatchString(sql) {
			continue
		}
		checked++
		t.Run(n, func(t *testing.T) {
			p := genericPlan(t, f.pool, sql, false, nil, "enable_seqscan = off")
			if seq := p.seqScans(watched...); len(seq) > 0 {
				t.Errorf("reads %v whole: plan\n%s", seq, p.String())
			}
		})
	}
	if checked < 20 {
		t.Errorf("checked %d queries, want the periodic work's (at least 20)", checked)
	}
}
