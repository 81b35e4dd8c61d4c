package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
)

func TestRunPairImport(t *testing.T) {
	pool := pgtest.NewDB(t)
	ctx := context.Background()
	if _, err := accounts.New(pool).EnsureOrg(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	d := &database{Pool: pool}
	var out, errOut bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errOut}
	count := func() int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM preference_pairs").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	hh := filepath.Join("..", "..", "..", "shared", "data", "hh-rlhf", "harmless-base-test.part1.jsonl.gz")
	if err := runPairImport(ctx, env, d, "acme", "hh-rlhf", hh, ""); err != nil {
		t.Fatal(err)
	}
	// The data's README: lines 87, 517, 926 and 1104 have an empty chosen reply.
	for _, want := range []string{"imported hh-rlhf pairs from harmless-base-test.part1.jsonl.gz into acme:",
		"line 87 skipped: empty chosen reply", "line 1104 skipped: empty chosen reply"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	stored := count()
	if stored < 1100 || stored > 1152 {
		t.Fatalf("%d pairs stored from 1,156 lines less 4 empty", stored)
	}

	dir := t.TempDir()
	lfs := filepath.Join(dir, "pairs.jsonl")
	if err := os.WriteFile(lfs, []byte("version https://git-lfs.github.com/spec/v1\noid sha256:abcd\nsize 99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runPairImport(ctx, env, d, "acme", "trl", lfs, "")
	if err == nil || !strings.Contains(err.Error(), "Git LFS pointer") || !strings.Contains(err.Error(), "nothing was stored") {
		t.Fatalf("LFS pointer: %v", err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"prompt":"q","chosen":"a","rejected":"b"}`+"\n"+`{"prompt":"q"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runPairImport(ctx, env, d, "acme", "trl", bad, ""); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad line: %v", err)
	}
	if err := runPairImport(ctx, env, d, "acme", "csv", bad, ""); err == nil || !strings.Contains(err.Error(), "--kind") {
		t.Fatalf("bad kind: %v", err)
	}
	if err := runPairImport(ctx, env, d, "nobody", "trl", bad, ""); err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("unknown org: %v", err)
	}
	if n := count(); n != stored {
		t.Fatalf("refused files stored %d pairs", n-stored)
	}
}

// --dataset puts every pair of the file into a new dataset: on a second
// run too, when the pairs are already stored and nothing new is.
func TestImportPairsIntoDataset(t *testing.T) {
	pool, url := pgtest.NewDBURL(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("CURATE_DATA_DIR", t.TempDir())
	ctx := context.Background()
	if _, err := accounts.New(pool).EnsureOrg(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	scalar := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	idRE := regexp.MustCompile(`dataset ([0-9a-f-]{36}) "HH harmless" \(preference_pairs, curating\) holds (\d+) pairs`)
	hh := filepath.Join("..", "..", "..", "shared", "data", "hh-rlhf", "harmless-base-test.part1.jsonl.gz")

	// A dataset holds exactly the stored pairs, each once: the members
	// that are not pairs of the organisation, and its pairs that are not
	// members, are both none.
	check := func(out string) string {
		t.Helper()
		m := idRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no dataset line in:\n%s", out)
		}
		stored := scalar("SELECT count(*) FROM preference_pairs")
		if m[2] != strconv.Itoa(stored) {
			t.Fatalf("dataset holds %s pairs, %d are stored", m[2], stored)
		}
		members := scalar("SELECT count(*) FROM training_dataset_members WHERE dataset_id = $1", m[1])
		missing := scalar(`SELECT count(*) FROM preference_pairs p WHERE NOT EXISTS
			(SELECT 1 FROM training_dataset_members d WHERE d.dataset_id = $1 AND d.pair_id = p.id)`, m[1])
		if members != stored || missing != 0 {
			t.Fatalf("%d members, %d stored pairs, %d stored pairs not members", members, stored, missing)
		}
		return m[1]
	}

	out, stderr, err := runCLI(t, "", "import", "--org", "acme", "--kind", "hh-rlhf", hh, "--dataset", "HH harmless")
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr)
	}
	first := check(out)
	stored := scalar("SELECT count(*) FROM preference_pairs")
	// 1,156 lines less the 4 with an empty chosen reply (the data's README).
	if stored < 1100 || stored > 1152 {
		t.Fatalf("%d pairs stored", stored)
	}

	out, stderr, err = runCLI(t, "", "import", "--dataset", "HH harmless", hh, "--kind", "hh-rlhf", "--org", "acme")
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr)
	}
	if !strings.Contains(out, ": 0 stored, ") {
		t.Fatalf("second import stored pairs:\n%s", out)
	}
	if second := check(out); second == first {
		t.Fatal("the second import reused the first dataset")
	}
	if n := scalar("SELECT count(*) FROM preference_pairs"); n != stored {
		t.Fatalf("%d pairs after the second import, %d before", n, stored)
	}

	// Feedback files make feedback, not pairs: refused before anything runs.
	for _, kind := range []string{"jsonl", "oasst"} {
		_, _, err := runCLI(t, "", "import", "--org", "acme", "--kind", kind, "--dataset", "X", hh)
		if err == nil || !strings.Contains(err.Error(), "--dataset") || !strings.Contains(err.Error(), "not preference pairs") {
			t.Errorf("--kind %s --dataset: %v", kind, err)
		}
	}
	_, _, err = runCLI(t, "", "import", "--org", "acme", "--kind", "hh-rlhf", "--dataset", "  ", hh)
	if err == nil || !strings.Contains(err.Error(), "--dataset") {
		t.Errorf("blank dataset name: %v", err)
	}
	if n := scalar("SELECT count(*) FROM training_datasets"); n != 2 {
		t.Fatalf("%d datasets, want 2", n)
	}
}
