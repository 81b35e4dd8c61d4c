package importer_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/importer"
	"github.com/curate/curate/internal/secrets"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// oasstFile is the OpenAssistant sample, beside the checkout.
const oasstFile = "../../../shared/data/oasst/en_100_tree.jsonl"

type fixture struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	svc   *importer.Service
	orgID uuid.UUID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	box, err := secrets.New(strings.Repeat("s", 32))
	if err != nil {
		t.Fatal(err)
	}
	svc := &importer.Service{Pool: pool, Q: db.New(pool), Feedback: &feedback.Service{Pool: pool}, Secrets: box,
		DataDir: t.TempDir(), Log: slog.New(slog.DiscardHandler)}
	return &fixture{ctx: ctx, pool: pool, svc: svc, orgID: org.ID}
}

var cli = audit.Actor{Kind: "system", Label: "cli"}

// importPath records a run for a file read in place (as the CLI does) and runs it.
func (f *fixture) importPath(t *testing.T, kind, path string) (db.ImportRun, importer.Summary, error) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.svc.Start(f.ctx, cli, importer.NewRun{OrgID: f.orgID, Kind: kind, FileName: filepath.Base(path), Size: fi.Size()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := f.svc.Run(f.ctx, f.orgID, run.ID, path, nil)
	run, gerr := f.svc.Q.ImportRunGet(f.ctx, db.ImportRunGetParams{OrgID: f.orgID, ID: run.ID})
	if gerr != nil {
		t.Fatal(gerr)
	}
	return run, sum, err
}

func (f *fixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(f.ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// oasstExpect walks the sample's trees on its own: every assistant reply
// (the sample has no deleted or failed-review messages) and its votes.
type oasstExpect struct{ replies, up, down, neutral int }

func countOASST(t *testing.T) oasstExpect {
	t.Helper()
	b, err := os.ReadFile(oasstFile)
	if err != nil {
		t.Fatal(err)
	}
	var e oasstExpect
	var walk func(m map[string]any)
	walk = func(m map[string]any) {
		if m["role"] == "assistant" {
			e.replies++
			emojis, _ := m["emojis"].(map[string]any)
			up, _ := emojis["+1"].(float64)
			down, _ := emojis["-1"].(float64)
			switch {
			case up > down:
				e.up++
			case down > up:
				e.down++
			default:
				e.neutral++
			}
		}
		replies, _ := m["replies"].([]any)
		for _, r := range replies {
			walk(r.(map[string]any))
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var tree map[string]any
		if err := json.Unmarshal([]byte(line), &tree); err != nil {
			t.Fatal(err)
		}
		walk(tree["prompt"].(map[string]any))
	}
	return e
}

func TestOASSTImportIsIdempotent(t *testing.T) {
	f := newFixture(t)
	want := countOASST(t)
	fi, _ := os.Stat(oasstFile)

	run, sum, err := f.importPath(t, importer.KindOASST, oasstFile)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Stored != want.replies || sum.Duplicates != 0 || sum.Skipped != 0 {
		t.Fatalf("first import: %+v, want %d stored", sum, want.replies)
	}
	if run.Status != importer.StatusSucceeded || run.Stored != int32(want.replies) || run.BytesDone != fi.Size() || run.FileSize != fi.Size() {
		t.Fatalf("run row: status %s, stored %d, bytes %d/%d", run.Status, run.Stored, run.BytesDone, run.FileSize)
	}
	for typ, n := range map[string]int{"thumbs_up": want.up, "thumbs_down": want.down, "detailed": want.neutral} {
		if got := f.count(t, "SELECT count(*) FROM feedback WHERE feedback_type = $1 AND source = 'file'", typ); got != n {
			t.Errorf("%s: %d rows, want %d", typ, got, n)
		}
	}
	// The data's README: 212 ranked sibling groups expand to 754 pairs.
	groups := f.count(t, `SELECT count(*) FROM (SELECT rank_group FROM feedback WHERE rank IS NOT NULL
		GROUP BY rank_group HAVING count(DISTINCT rank) > 1) g`)
	pairs := f.count(t, `SELECT count(*) FROM feedback a JOIN feedback b
		ON a.rank_group = b.rank_group AND a.id < b.id AND a.rank <> b.rank`)
	if groups != 212 || pairs != 754 {
		t.Errorf("ranked groups %d and pairs %d, want 212 and 754", groups, pairs)
	}

	// One reply checked by hand: the first tree's first reply answers its
	// prompt, grouped under the prompt's id.
	var first struct {
		Prompt struct {
			ID      string `json:"message_id"`
			Text    string `json:"text"`
			Replies []struct {
				ID   string `json:"message_id"`
				Text string `json:"text"`
				Rank *int   `json:"rank"`
			} `json:"replies"`
		} `json:"prompt"`
	}
	b, _ := os.ReadFile(oasstFile)
	if err := json.Unmarshal([]byte(strings.SplitN(string(b), "\n", 2)[0]), &first); err != nil {
		t.Fatal(err)
	}
	reply := first.Prompt.Replies[0]
	var query, response, group string
	var rank *int16
	if err := f.pool.QueryRow(f.ctx, "SELECT query, response, rank_group, rank FROM feedback WHERE external_id = $1", "oasst:"+reply.ID).
		Scan(&query, &response, &group, &rank); err != nil {
		t.Fatal(err)
	}
	if query != first.Prompt.Text || response != reply.Text || group != first.Prompt.ID || (rank == nil) != (reply.Rank == nil) ||
		(rank != nil && int(*rank) != *reply.Rank) {
		t.Errorf("first reply stored as query %.40q, response %.40q, group %s, rank %v", query, response, group, rank)
	}

	// Importing again changes nothing.
	_, sum, err = f.importPath(t, importer.KindOASST, oasstFile)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Stored != 0 || sum.Duplicates != want.replies {
		t.Fatalf("second import: %+v, want 0 stored and %d duplicates", sum, want.replies)
	}
	if n := f.count(t, "SELECT count(*) FROM feedback"); n != want.replies {
		t.Fatalf("%d rows after the second import, want %d", n, want.replies)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "feedback.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const goodLines = `{"query":"What is 2+2?","response":"4","feedback_type":"thumbs_up"}
{"query":"Capital of France?","response":"Lyon","feedback_type":"correction","correction":"Paris","external_id":"ext-2"}
{"query":"Rate me","response":"ok","feedback_type":"rating","rating":4,"tags":["A","a"]}
`

func TestJSONLImport(t *testing.T) {
	f := newFixture(t)
	path := writeFile(t, goodLines)
	_, sum, err := f.importPath(t, importer.KindJSONL, path)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Stored != 3 {
		t.Fatalf("stored %d, want 3", sum.Stored)
	}
	var correction string
	if err := f.pool.QueryRow(f.ctx, "SELECT correction FROM feedback WHERE external_id = 'ext-2'").Scan(&correction); err != nil || correction != "Paris" {
		t.Fatalf("ext-2: correction %q, %v", correction, err)
	}
	// Items without an external id get one from their content, so a
	// second import of the same file stores nothing.
	_, sum, err = f.importPath(t, importer.KindJSONL, path)
	if err != nil || sum.Stored != 0 || sum.Duplicates != 3 {
		t.Fatalf("second import: %+v, %v; want 3 duplicates", sum, err)
	}
	if n := f.count(t, "SELECT count(*) FROM feedback"); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
}

// A bad file fails naming its line, and nothing of it is stored.
func TestBadFilesStoreNothing(t *testing.T) {
	cases := []struct {
		name, kind, content string
		line                int
		mention             string
	}{
		{"truncated", importer.KindJSONL, goodLines + `{"query":"cut","response":"of`, 4, "cut off"},
		{"bad rating", importer.KindJSONL, goodLines + `{"query":"q","response":"r","feedback_type":"rating","rating":9}` + "\n", 4, "rating"},
		{"unknown field", importer.KindJSONL, `{"query":"q","response":"r","feedback_type":"thumbs_up","stars":3}` + "\n", 1, "stars"},
		{"not a tree", importer.KindOASST, goodLines, 1, "prompt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			run, _, err := f.importPath(t, tc.kind, writeFile(t, tc.content))
			if err == nil || !importer.IsBadInput(err) {
				t.Fatalf("err = %v, want a bad-input error", err)
			}
			if run.Status != importer.StatusFailed || !run.ErrorLine.Valid || int(run.ErrorLine.Int32) != tc.line ||
				!strings.Contains(run.Error, "line ") || !strings.Contains(run.Error, tc.mention) {
				t.Fatalf("run: status %s, line %v, error %q; want failed on line %d mentioning %q", run.Status, run.ErrorLine, run.Error, tc.line, tc.mention)
			}
			if n := f.count(t, "SELECT count(*) FROM feedback"); n != 0 {
				t.Fatalf("%d rows stored from a bad file", n)
			}
		})
	}
}

// An upload is kept under the data directory until its run ends, and its
// start is audited.
func TestUploadedRun(t *testing.T) {
	f := newFixture(t)
	user := audit.Actor{Kind: "user", ID: uuid.New(), Label: "ada@acme.test"}
	var enqueued uuid.UUID
	run, err := f.svc.Start(f.ctx, audit.Actor{Kind: "system", Label: user.Label}, importer.NewRun{OrgID: f.orgID, Kind: importer.KindJSONL,
		FileName: `C:\Users\ada\feedback.jsonl`, Body: strings.NewReader(goodLines)},
		func(_ context.Context, _ pgx.Tx, r db.ImportRun) error { enqueued = r.ID; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if enqueued != run.ID || run.FileName != "feedback.jsonl" || run.FileSize != int64(len(goodLines)) || run.Status != importer.StatusQueued {
		t.Fatalf("run %+v, enqueued %s", run, enqueued)
	}
	if b, err := os.ReadFile(f.svc.UploadPath(run.ID)); err != nil || string(b) != goodLines {
		t.Fatalf("kept file: %v", err)
	}
	if n := f.count(t, "SELECT count(*) FROM audit_log WHERE action = 'import.start' AND target_id = $1", run.ID.String()); n != 1 {
		t.Fatalf("%d audit entries for the start", n)
	}
	if _, err := f.svc.RunUpload(f.ctx, f.orgID, run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.svc.UploadPath(run.ID)); !os.IsNotExist(err) {
		t.Fatalf("the upload was not removed after its run: %v", err)
	}

	for name, in := range map[string]importer.NewRun{
		"bad kind": {OrgID: f.orgID, Kind: "csv", FileName: "a.csv", Body: strings.NewReader("x")},
		"empty":    {OrgID: f.orgID, Kind: "jsonl", FileName: "a.jsonl", Body: strings.NewReader("")},
	} {
		if _, err := f.svc.Start(f.ctx, user, in, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if n := f.count(t, "SELECT count(*) FROM import_runs"); n != 1 {
		t.Errorf("%d runs recorded, want only the good one", n)
	}
}
