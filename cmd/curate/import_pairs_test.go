package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/curate/curate/internal/publicdata"
)

func TestImportPairsCommand(t *testing.T) {
	count := importEnv(t)
	out, stderr, err := runCLI(t, "", "import", "--org", "acme", "--kind", "hh-rlhf", fixture("hh_rlhf.jsonl.gz"))
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr)
	}
	for _, want := range []string{"imported hh-rlhf pairs from hh_rlhf.jsonl.gz into acme: 2 stored, 0 already there, 2 skipped",
		"line 3 skipped: empty chosen reply", "line 4 skipped: chosen and rejected are identical"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "storing") || !strings.Contains(stderr, "100%") {
		t.Errorf("no progress bar on stderr: %q", stderr)
	}
	if count("preference_pairs") != 2 || count("import_runs WHERE kind = 'hh-rlhf' AND stored = 2 AND skipped = 2") != 1 {
		t.Fatalf("%d pairs stored, or no run recording them", count("preference_pairs"))
	}

	dir := t.TempDir()
	lfs := filepath.Join(dir, "pairs.jsonl")
	if err := os.WriteFile(lfs, []byte("version https://git-lfs.github.com/spec/v1\noid sha256:abcd\nsize 99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "", "import", "--org", "acme", "--kind", "trl", lfs)
	if err == nil || !strings.Contains(err.Error(), "Git LFS pointer") || !strings.Contains(err.Error(), "nothing was stored") {
		t.Fatalf("LFS pointer: %v", err)
	}
	bad := fixture("trl_malformed.jsonl")
	if _, _, err := runCLI(t, "", "import", "--org", "acme", "--kind", "trl", bad); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad line: %v", err)
	}
	if _, _, err := runCLI(t, "", "import", "--org", "acme", "--kind", "csv", bad); err == nil || !strings.Contains(err.Error(), "--kind") {
		t.Fatalf("bad kind: %v", err)
	}
	if _, _, err := runCLI(t, "", "import", "--org", "nobody", "--kind", "trl", bad); err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("unknown org: %v", err)
	}
	if n := count("preference_pairs"); n != 2 {
		t.Fatalf("refused files stored %d pairs", n-2)
	}
}

// The public HH-RLHF sample: lines 87, 517, 926 and 1104 have an empty
// chosen reply (the data's README).
func TestImportPairsCommandPublicData(t *testing.T) {
	hh := publicdata.Path(t, "hh-rlhf", "harmless-base-test.part1.jsonl.gz")
	count := importEnv(t)
	out, stderr, err := runCLI(t, "", "import", "--org", "acme", "--kind", "hh-rlhf", hh)
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr)
	}
	for _, want := range []string{"imported hh-rlhf pairs from harmless-base-test.part1.jsonl.gz into acme:",
		"line 87 skipped: empty chosen reply", "line 517 skipped: empty chosen reply",
		"line 926 skipped: empty chosen reply", "line 1104 skipped: empty chosen reply"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if stored := count("preference_pairs"); stored < 1100 || stored > 1152 {
		t.Fatalf("%d pairs stored from 1,156 lines less 4 empty", stored)
	}
}

// --dataset puts every pair of the file into a new dataset: on a second
// run too, when the pairs are already stored and nothing new is.
func TestImportPairsIntoDataset(t *testing.T) {
	count := importEnv(t)
	idRE := regexp.MustCompile(`dataset ([0-9a-f-]{36}) "Juggling" \(preference_pairs, curating\) holds (\d+) pairs`)
	file := fixture("trl_preference.jsonl")

	// A dataset holds exactly the stored pairs, each once: the members
	// that are not pairs of the organisation, and its pairs that are not
	// members, are both none.
	check := func(out string) string {
		t.Helper()
		m := idRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no dataset line in:\n%s", out)
		}
		stored := count("preference_pairs")
		if m[2] != strconv.Itoa(stored) || stored != 3 {
			t.Fatalf("dataset holds %s pairs, %d are stored, want 3", m[2], stored)
		}
		members := count("training_dataset_members WHERE dataset_id = '" + m[1] + "'")
		missing := count(`preference_pairs p WHERE NOT EXISTS
			(SELECT 1 FROM training_dataset_members d WHERE d.dataset_id = '` + m[1] + `' AND d.pair_id = p.id)`)
		if members != stored || missing != 0 {
			t.Fatalf("%d members, %d stored pairs, %d stored pairs not members", members, stored, missing)
		}
		return m[1]
	}

	out, stderr, err := runCLI(t, "", "import", "--org", "acme", "--kind", "trl", file, "--dataset", "Juggling")
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr)
	}
	first := check(out)

	out, stderr, err = runCLI(t, "", "import", "--dataset", "Juggling", file, "--kind", "trl", "--org", "acme")
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr)
	}
	if !strings.Contains(out, ": 0 stored, 3 already there, 1 skipped") {
		t.Fatalf("second import stored pairs:\n%s", out)
	}
	if second := check(out); second == first {
		t.Fatal("the second import reused the first dataset")
	}

	// Feedback files make feedback, not pairs: refused before anything runs.
	for _, kind := range []string{"jsonl", "oasst"} {
		_, _, err := runCLI(t, "", "import", "--org", "acme", "--kind", kind, "--dataset", "X", file)
		if err == nil || !strings.Contains(err.Error(), "--dataset") || !strings.Contains(err.Error(), "not preference pairs") {
			t.Errorf("--kind %s --dataset: %v", kind, err)
		}
	}
	_, _, err = runCLI(t, "", "import", "--org", "acme", "--kind", "trl", "--dataset", "  ", file)
	if err == nil || !strings.Contains(err.Error(), "--dataset") {
		t.Errorf("blank dataset name: %v", err)
	}
	if n := count("training_datasets"); n != 2 {
		t.Fatalf("%d datasets, want 2", n)
	}
}
