package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/publicdata"
)

// fixture is a file written for the import tests (see importfile's testdata).
func fixture(name string) string {
	return filepath.Join("..", "..", "internal", "importfile", "testdata", name)
}

// importEnv points the CLI at a fresh database with organisation acme and
// returns a counter of rows in a table.
func importEnv(t *testing.T) func(table string) int {
	t.Helper()
	pool, url := pgtest.NewDBURL(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("CURATE_DATA_DIR", t.TempDir())
	ctx := context.Background()
	if _, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	return func(table string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

func TestImportCommand(t *testing.T) {
	count := importEnv(t)
	// Six assistant replies; a seventh, deleted, is skipped.
	file := fixture("oasst_trees.jsonl")
	out, stderr, err := runCLI(t, "", "import", "--org", "acme", "--kind", "oasst", file)
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr)
	}
	for _, want := range []string{"imported oasst_trees.jsonl into acme: 6 stored, 0 already there, 1 skipped", "  skipped 1: deleted (with its replies)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output %q, want %q", out, want)
		}
	}
	if !strings.Contains(stderr, "storing") || !strings.Contains(stderr, "100%") {
		t.Errorf("no progress bar on stderr: %q", stderr)
	}
	// Again, flags after the file: nothing new.
	out, _, err = runCLI(t, "", "import", file, "--kind", "oasst", "--org", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if want := "0 stored, 6 already there"; !strings.Contains(out, want) || count("feedback") != 6 {
		t.Fatalf("second import: %q, %d rows; want %q and 6 rows", out, count("feedback"), want)
	}

	// A cut-off file fails naming its line, and stores nothing.
	cut := fixture("feedback_truncated.jsonl")
	_, _, err = runCLI(t, "", "import", "--org", "acme", "--kind", "jsonl", cut)
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "nothing was stored") {
		t.Fatalf("err = %v, want a failure on line 3", err)
	}
	if count("feedback") != 6 {
		t.Fatalf("%d rows after the failed import, want 6", count("feedback"))
	}

	for _, bad := range [][]string{
		{"import", "--org", "acme", "--kind", "csv", cut},
		{"import", "--org", "nope", "--kind", "jsonl", cut},
		{"import", "--org", "acme", "--kind", "jsonl"},
		{"import", "--org", "acme", "--kind", "jsonl", "/does/not/exist.jsonl"},
	} {
		if _, _, err := runCLI(t, "", bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// Every import, the failed one too, is a run.
	if n := count("import_runs"); n != 3 {
		t.Errorf("%d import runs, want 3", n)
	}
}

// The public OpenAssistant sample: its README's 687 assistant replies.
func TestImportCommandPublicData(t *testing.T) {
	file := publicdata.Path(t, "oasst", "en_100_tree.jsonl")
	count := importEnv(t)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if replies := len(regexp.MustCompile(`"role": *"assistant"`).FindAll(b, -1)); replies != 687 {
		t.Fatalf("%d assistant messages in the sample, its README says 687", replies)
	}
	out, stderr, err := runCLI(t, "", "import", "--org", "acme", "--kind", "oasst", file)
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr)
	}
	if want := "imported en_100_tree.jsonl into acme: 687 stored, 0 already there, 0 skipped"; !strings.Contains(out, want) || count("feedback") != 687 {
		t.Fatalf("output %q, want %q", out, want)
	}
}
