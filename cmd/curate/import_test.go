package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
)

func TestImportCommand(t *testing.T) {
	pool, url := pgtest.NewDBURL(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("CURATE_DATA_DIR", t.TempDir())
	ctx := context.Background()
	if _, err := accounts.New(pool).EnsureOrg(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM feedback").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Every assistant message of the sample is one item.
	const file = "../../../shared/data/oasst/en_100_tree.jsonl"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	replies := len(regexp.MustCompile(`"role": *"assistant"`).FindAll(b, -1))

	out, stderr, err := runCLI(t, "", "import", "--org", "acme", "--kind", "oasst", file)
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr)
	}
	if want := fmt.Sprintf("imported en_100_tree.jsonl into acme: %d stored, 0 already there, 0 skipped", replies); !strings.Contains(out, want) {
		t.Fatalf("output %q, want %q", out, want)
	}
	if !strings.Contains(stderr, "storing") || !strings.Contains(stderr, "100%") {
		t.Errorf("no progress bar on stderr: %q", stderr)
	}
	// Again, flags after the file: nothing new.
	out, _, err = runCLI(t, "", "import", file, "--kind", "oasst", "--org", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("0 stored, %d already there", replies); !strings.Contains(out, want) || count() != replies {
		t.Fatalf("second import: %q, %d rows; want %q and %d rows", out, count(), want, replies)
	}

	// A cut-off file fails naming its line, and stores nothing.
	cut := filepath.Join(t.TempDir(), "cut.jsonl")
	if err := os.WriteFile(cut, []byte(`{"query":"q","response":"r","feedback_type":"thumbs_up"}`+"\n"+`{"query":"q2","resp`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "", "import", "--org", "acme", "--kind", "jsonl", cut)
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "nothing was stored") {
		t.Fatalf("err = %v, want a failure on line 2", err)
	}
	if count() != replies {
		t.Fatalf("%d rows after the failed import, want %d", count(), replies)
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
}
