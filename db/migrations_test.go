package db_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sumFile records the sha256 of every migration ever added, one
// "<sha256>  <file>" line each, in the order they were added.
const sumFile = "migrations.sum"

var updateSums = flag.Bool("update", false, "TestMigrationsAppendOnly: append the checksums of new migrations to db/migrations.sum")

const howToRecord = "go test ./db -run TestMigrationsAppendOnly -update"

// Migrations are append-only: a database that applied a migration never
// applies it again, so editing one changes nothing where it already ran
// and leaves databases that differ by when they were created. Every
// migration's checksum is recorded in migrations.sum; an edit, a rename
// or a deletion of a recorded one fails here, and a new one must have its
// checksum appended (-update appends; it never rewrites a recorded line).
func TestMigrationsAppendOnly(t *testing.T) {
	recorded, order, err := readSums(sumFile)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		present[filepath.Base(f)] = hex.EncodeToString(sum[:])
	}
	problems := appendOnlyProblems(recorded, order, present)
	var fresh []string
	for name := range present {
		if _, ok := recorded[name]; !ok {
			fresh = append(fresh, name)
		}
	}
	slices.Sort(fresh)
	for _, p := range problems {
		t.Error(p)
	}
	if len(fresh) == 0 {
		return
	}
	if !*updateSums {
		t.Errorf("new migrations %s have no recorded checksum: once each is final, record it with\n\t%s\n"+
			"and commit db/%s with it", strings.Join(fresh, ", "), howToRecord, sumFile)
		return
	}
	if len(problems) > 0 {
		t.Fatalf("not recording new migrations while a recorded one is changed or missing")
	}
	f, err := os.OpenFile(sumFile, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range fresh {
		if _, err := fmt.Fprintf(f, "%s  %s\n", present[name], name); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s", name)
	}
}

// appendOnlyProblems says what happened to each recorded migration that is
// not in present as it was recorded.
func appendOnlyProblems(recorded map[string]string, order []string, present map[string]string) []string {
	var out []string
	for _, name := range order {
		sum, ok := present[name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("migration %s was removed or renamed after it was added. Migrations are append-only: "+
				"databases that applied it keep it. Restore it, and add a new migration that undoes what it did.", name))
		case sum != recorded[name]:
			out = append(out, fmt.Sprintf("migration %s was edited after it was added (its sha256 is %s, recorded %s). Migrations are append-only: "+
				"a database that applied it will never run the edit. Revert the edit and add a new migration "+
				"(the next free number in db/migrations) that makes the change.", name, sum, recorded[name]))
		}
	}
	return out
}

// readSums reads the checksum list: name → sha256, and the names in order.
func readSums(path string) (map[string]string, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	sums := map[string]string{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 || name == "" {
			return nil, nil, fmt.Errorf("%s:%d: want \"<sha256>  <file>\", got %q", path, n, line)
		}
		if _, dup := sums[name]; dup {
			return nil, nil, fmt.Errorf("%s:%d: %s is recorded twice", path, n, name)
		}
		sums[name] = sum
		order = append(order, name)
	}
	return sums, order, sc.Err()
}

// The guard's verdicts: an edited, a removed and a new migration are each
// named, and an untouched list passes.
func TestAppendOnlyProblems(t *testing.T) {
	recorded := map[string]string{"00001_a.sql": "aa", "00002_b.sql": "bb"}
	order := []string{"00001_a.sql", "00002_b.sql"}
	if p := appendOnlyProblems(recorded, order, map[string]string{"00001_a.sql": "aa", "00002_b.sql": "bb", "00003_c.sql": "cc"}); len(p) != 0 {
		t.Errorf("untouched migrations and a new one: %v", p)
	}
	p := appendOnlyProblems(recorded, order, map[string]string{"00001_a.sql": "a2"})
	if len(p) != 2 || !strings.Contains(p[0], "00001_a.sql was edited") || !strings.Contains(p[0], "add a new migration") ||
		!strings.Contains(p[1], "00002_b.sql was removed") {
		t.Errorf("edited and removed: %q", p)
	}
}
