package scratch_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/curate/curate/internal/scratch"
)

// Opening scratch removes what ended processes left (a directory nobody
// holds) and keeps the directory of a live one and anything not named as
// a process directory; files are 0600 in a 0700 directory, and Close
// removes the process's directory.
func TestSweepKeepsLiveDirectories(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tmp")
	live, err := scratch.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	f, err := live.CreateTemp("export-*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Stat(f.Name()); fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Dir(f.Name())); fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v", fi.Mode())
	}

	// What a process killed mid-export leaves: its directory, unlocked.
	dead := filepath.Join(root, "curate-scratch-123")
	if err := os.MkdirAll(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "export-1.jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not ours: a root that is the system's /tmp (data directory /).
	other := filepath.Join(root, "someone-else")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}

	next, err := scratch.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the dead process's directory is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a directory that is not a process's was removed: %v", err)
	}
	if _, err := os.Stat(f.Name()); err != nil {
		t.Fatalf("the live process's file was removed: %v", err)
	}

	// Each process writes in a directory of its own.
	g, err := next.CreateTemp("export-*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if filepath.Dir(g.Name()) == filepath.Dir(f.Name()) {
		t.Fatal("two processes share a directory")
	}

	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(f.Name())); !os.IsNotExist(err) {
		t.Fatalf("Close left the directory: %v", err)
	}
}

// A process that writes nothing leaves nothing, not even the root.
func TestNothingWrittenNothingLeft(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tmp")
	d, err := scratch.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("Open made the root (%v)", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
