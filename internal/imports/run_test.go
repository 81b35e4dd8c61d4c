package imports_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/publicdata"
	"github.com/curate/curate/internal/secrets"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a file written for these tests (see importfile's testdata).
func fixture(name string) string { return filepath.Join("..", "importfile", "testdata", name) }

type env struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	svc   *imports.Service
	orgID uuid.UUID
	// blobDir is the directory of the service's bucket.
	blobDir string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	inserter, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	blobDir := t.TempDir()
	bucket, err := blobstore.OpenDir(blobDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	box, err := secrets.New(strings.Repeat("s", 32))
	if err != nil {
		t.Fatal(err)
	}
	// The fake Langfuse listens on loopback.
	svc := imports.New(pool, feedback.New(pool), pairs.New(pool), inserter, box, bucket, allow(t, "127.0.0.0/8,::1"), slog.New(slog.DiscardHandler))
	return &env{ctx: ctx, pool: pool, svc: svc, orgID: org.ID, blobDir: blobDir}
}

var cli = audit.Actor{Kind: "system", Label: "cli"}

// importPath records a run for a file read in place (as the CLI does) and
// runs it, returning the run's row as it ends.
func (e *env) importPath(t testing.TB, kind, path string) (db.ImportRun, imports.Summary, error) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	run, err := e.svc.Start(e.ctx, cli, imports.NewRun{OrgID: e.orgID, Kind: kind, FileName: filepath.Base(path), Size: fi.Size()})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.svc.Run(e.ctx, e.orgID, run.ID, path, nil)
	run, gerr := e.svc.GetRun(e.ctx, e.orgID, run.ID)
	if gerr != nil {
		t.Fatal(gerr)
	}
	return run, sum, err
}

func (e *env) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "upload.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rankedPairs counts the ranked sibling groups among stored feedback and
// the pairs they expand to.
func (e *env) rankedPairs(t *testing.T) (groups, pairs int) {
	t.Helper()
	groups = e.count(t, `SELECT count(*) FROM (SELECT rank_group FROM feedback WHERE rank IS NOT NULL
		GROUP BY rank_group HAVING count(DISTINCT rank) > 1) g`)
	pairs = e.count(t, `SELECT count(*) FROM feedback a JOIN feedback b
		ON a.rank_group = b.rank_group AND a.id < b.id AND a.rank <> b.rank`)
	return groups, pairs
}

// The fixture's two trees: five replies in t-1 (votes give two up, two
// down, one without a majority; ranked in two groups: three replies to the
// prompt, two to the follow-up), one in t-2 and one deleted reply.
func TestOASSTFeedbackImport(t *testing.T) {
	e := newEnv(t)
	path := fixture("oasst_trees.jsonl")
	run, sum, err := e.importPath(t, imports.KindOASST, path)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Stored != 6 || sum.Duplicates != 0 || sum.Skipped != 1 || sum.Reasons["deleted (with its replies)"] != 1 {
		t.Fatalf("summary %+v", sum)
	}
	var reasons map[string]int
	if err := json.Unmarshal(run.SkipReasons, &reasons); err != nil || reasons["deleted (with its replies)"] != 1 {
		t.Fatalf("run's skip reasons %s (%v)", run.SkipReasons, err)
	}
	for typ, n := range map[string]int{"thumbs_up": 2, "thumbs_down": 2, "detailed": 2} {
		if got := e.count(t, "SELECT count(*) FROM feedback WHERE feedback_type = $1 AND source = 'file'", typ); got != n {
			t.Errorf("%s: %d rows, want %d", typ, got, n)
		}
	}
	if groups, pairs := e.rankedPairs(t); groups != 2 || pairs != 4 {
		t.Errorf("ranked groups %d and pairs %d, want 2 and 4", groups, pairs)
	}
	// The follow-up's reply: its question is the follow-up, the earlier
	// turns are context, its group is the follow-up message.
	var query, group, comment string
	var ctxJSON []byte
	if err := e.pool.QueryRow(e.ctx, "SELECT query, rank_group, comment, context FROM feedback WHERE external_id = 'oasst:m-6'").
		Scan(&query, &group, &comment, &ctxJSON); err != nil {
		t.Fatal(err)
	}
	if query != "Something less common?" || group != "m-5" || comment != "OpenAssistant votes: 0 up, 1 down" ||
		!strings.Contains(string(ctxJSON), "Smokey suits a grey cat.") {
		t.Errorf("m-6 stored as query %q, group %q, comment %q, context %s", query, group, comment, ctxJSON)
	}
	if n := e.count(t, "SELECT count(*) FROM feedback WHERE external_id = 'oasst:m-4' AND 'synthetic' = ANY(tags) AND model = 'fixture-7b'"); n != 1 {
		t.Error("m-4: synthetic tag or model missing")
	}

	_, sum, err = e.importPath(t, imports.KindOASST, path)
	if err != nil || sum.Stored != 0 || sum.Duplicates != 6 {
		t.Fatalf("second import: %+v, %v; want 6 duplicates", sum, err)
	}
}

// The public OpenAssistant sample: every assistant reply stored once, and
// the 212 ranked sibling groups (754 pairs) its README counts.
func TestOASSTFeedbackImportPublicData(t *testing.T) {
	path := publicdata.Path(t, "oasst", "en_100_tree.jsonl")
	e := newEnv(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	replies := strings.Count(string(b), `"role": "assistant"`) + strings.Count(string(b), `"role":"assistant"`)
	fi, _ := os.Stat(path)

	run, sum, err := e.importPath(t, imports.KindOASST, path)
	if err != nil {
		t.Fatal(err)
	}
	// The data's README: 687 assistant replies.
	if sum.Stored != 687 || replies != 687 || sum.Duplicates != 0 || sum.Skipped != 0 {
		t.Fatalf("first import: %+v (%d replies in the file), want 687 stored", sum, replies)
	}
	if run.Status != imports.StatusSucceeded || run.Stored != 687 || run.BytesDone != fi.Size() || run.FileSize != fi.Size() {
		t.Fatalf("run row: status %s, stored %d, bytes %d/%d", run.Status, run.Stored, run.BytesDone, run.FileSize)
	}
	if groups, pairs := e.rankedPairs(t); groups != 212 || pairs != 754 {
		t.Errorf("ranked groups %d and pairs %d, want 212 and 754", groups, pairs)
	}
	_, sum, err = e.importPath(t, imports.KindOASST, path)
	if err != nil || sum.Stored != 0 || sum.Duplicates != 687 {
		t.Fatalf("second import: %+v, %v", sum, err)
	}
	if n := e.count(t, "SELECT count(*) FROM feedback"); n != 687 {
		t.Fatalf("%d rows after the second import, want 687", n)
	}
}

func TestJSONLImport(t *testing.T) {
	e := newEnv(t)
	path := fixture("feedback.jsonl")
	_, sum, err := e.importPath(t, imports.KindJSONL, path)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Stored != 3 {
		t.Fatalf("stored %d, want 3", sum.Stored)
	}
	var correction string
	if err := e.pool.QueryRow(e.ctx, "SELECT correction FROM feedback WHERE external_id = 'fx-2'").Scan(&correction); err != nil || correction != "30 days from delivery." {
		t.Fatalf("fx-2: correction %q, %v", correction, err)
	}
	// The item without an external id gets one from its content, so a
	// second import of the same file stores nothing.
	if n := e.count(t, "SELECT count(*) FROM feedback WHERE external_id LIKE 'jsonl:%' AND rating = 2"); n != 1 {
		t.Fatalf("%d items with a content-derived external id", n)
	}
	_, sum, err = e.importPath(t, imports.KindJSONL, path)
	if err != nil || sum.Stored != 0 || sum.Duplicates != 3 {
		t.Fatalf("second import: %+v, %v; want 3 duplicates", sum, err)
	}
	if n := e.count(t, "SELECT count(*) FROM feedback"); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
}

const goodLines = `{"query":"What is 2+2?","response":"4","feedback_type":"thumbs_up"}
{"query":"Capital of France?","response":"Lyon","feedback_type":"correction","correction":"Paris","external_id":"ext-2"}
{"query":"Rate me","response":"ok","feedback_type":"rating","rating":4,"tags":["A","a"]}
`

// A bad file fails naming its line, and nothing of it is stored, whatever
// it was to hold.
func TestBadFilesStoreNothing(t *testing.T) {
	cases := []struct {
		name, kind, path string
		line             int
		mention          string
	}{
		{"truncated", imports.KindJSONL, fixture("feedback_truncated.jsonl"), 3, "cut off"},
		{"bad rating", imports.KindJSONL, writeFile(t, goodLines+`{"query":"q","response":"r","feedback_type":"rating","rating":9}`+"\n"), 4, "rating"},
		{"unknown field", imports.KindJSONL, writeFile(t, `{"query":"q","response":"r","feedback_type":"thumbs_up","stars":3}`+"\n"), 1, "stars"},
		{"not a tree", imports.KindOASST, fixture("feedback.jsonl"), 1, "prompt"},
		{"feedback as pairs", imports.KindTRL, fixture("feedback.jsonl"), 1, "query"},
		{"another format's line", imports.KindTRL, fixture("trl_malformed.jsonl"), 2, "messages"},
		{"TRL as HH-RLHF", imports.KindHHRLHF, fixture("trl_preference.jsonl"), 1, "prompt"},
		{"pair file cut off", imports.KindHHRLHF, writeFile(t, `{"chosen":"\n\nHuman: a\n\nAssistant: b","rejected":"\n\nHuman: a\n\nAssistant: c"}`+"\n"+`{"chosen":"\n\nHum`), 2, "cut off"},
		{"prompt ends with the assistant", imports.KindTRL, writeFile(t, `{"prompt":[{"role":"user","content":"q"},{"role":"assistant","content":"x"}],"chosen":"a","rejected":"b"}`+"\n"), 1, "must end with the user's turn"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			run, _, err := e.importPath(t, tc.kind, tc.path)
			if err == nil || !imports.IsBadInput(err) {
				t.Fatalf("err = %v, want a bad-input error", err)
			}
			if run.Status != imports.StatusFailed || !run.ErrorLine.Valid || int(run.ErrorLine.Int32) != tc.line ||
				!strings.Contains(run.Error, "line ") || !strings.Contains(run.Error, tc.mention) || run.Stored != 0 {
				t.Fatalf("run: status %s, line %v, error %q, stored %d; want failed on line %d mentioning %q",
					run.Status, run.ErrorLine, run.Error, run.Stored, tc.line, tc.mention)
			}
			if n := e.count(t, "SELECT (SELECT count(*) FROM feedback) + (SELECT count(*) FROM preference_pairs)"); n != 0 {
				t.Fatalf("%d rows stored from a bad file", n)
			}
		})
	}
}
