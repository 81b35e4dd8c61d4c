package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
	if err := runPairImport(ctx, env, d, "acme", "hh-rlhf", hh); err != nil {
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
	err := runPairImport(ctx, env, d, "acme", "trl", lfs)
	if err == nil || !strings.Contains(err.Error(), "Git LFS pointer") || !strings.Contains(err.Error(), "nothing was stored") {
		t.Fatalf("LFS pointer: %v", err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"prompt":"q","chosen":"a","rejected":"b"}`+"\n"+`{"prompt":"q"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runPairImport(ctx, env, d, "acme", "trl", bad); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad line: %v", err)
	}
	if err := runPairImport(ctx, env, d, "acme", "csv", bad); err == nil || !strings.Contains(err.Error(), "--kind") {
		t.Fatalf("bad kind: %v", err)
	}
	if err := runPairImport(ctx, env, d, "nobody", "trl", bad); err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("unknown org: %v", err)
	}
	if n := count(); n != stored {
		t.Fatalf("refused files stored %d pairs", n-stored)
	}
}
