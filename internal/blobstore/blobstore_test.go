package blobstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob"

	"github.com/curate/curate/internal/blobstore"
)

func TestDefaultIsExportsDirectory(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	b, err := blobstore.Open(ctx, "", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAll(ctx, "org/ds/x/train.jsonl", []byte("{}\n"), nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dataDir, "exports", "org", "ds", "x", "train.jsonl"))
	if err != nil || string(got) != "{}\n" {
		t.Fatalf("file: %q %v", got, err)
	}
	// No metadata sidecar files beside it.
	entries, _ := os.ReadDir(filepath.Join(dataDir, "exports", "org", "ds", "x"))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries", len(entries))
	}
}

// A write to a directory bucket, the default or one named by a file://
// URL, keeps its temporary file beside the final one, not in the system's
// temporary directory, and a Private write is readable by its owner alone
// while it is written and once it is complete.
func TestDirectoryWritesStayInTheBucket(t *testing.T) {
	ctx := context.Background()
	shared := t.TempDir()
	for name, tc := range map[string]struct{ url, dir string }{
		"default":  {"", "exports"},
		"file URL": {"file://" + shared, ""},
	} {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			dataDir := t.TempDir()
			b, err := blobstore.Open(ctx, tc.url, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			root := filepath.Join(dataDir, tc.dir)
			if tc.url != "" {
				root = shared
			}
			w, err := b.NewWriter(ctx, "uploads/o/"+name, &blob.WriterOptions{ContentType: "text/plain", BeforeWrite: blobstore.Private})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte("secret\n")); err != nil {
				t.Fatal(err)
			}
			inTmp, _ := os.ReadDir(tmp)
			partial, _ := filepath.Glob(filepath.Join(root, "uploads", "o", name+".*.tmp"))
			if len(inTmp) != 0 || len(partial) != 1 {
				t.Fatalf("while writing: %d files in the system's temporary directory, %v beside the key", len(inTmp), partial)
			}
			if fi, err := os.Stat(partial[0]); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("the temporary file: %v %v, want mode 0600", fi.Mode(), err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(root, "uploads", "o", name))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("the stored file: %v %v, want mode 0600", fi, err)
			}
			if left, _ := filepath.Glob(filepath.Join(root, "uploads", "o", "*.tmp")); len(left) != 0 {
				t.Fatalf("temporary files left: %v", left)
			}
		})
	}
}

func TestBadURL(t *testing.T) {
	_, err := blobstore.Open(context.Background(), "ftp://nowhere", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "CURATE_BLOB_URL") {
		t.Fatalf("bad URL: %v", err)
	}
}
