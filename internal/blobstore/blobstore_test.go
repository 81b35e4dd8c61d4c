package blobstore_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// fakeS3 speaks the part of the S3 REST API (path-style) that writing,
// copying, reading and deleting objects uses.
type fakeS3 struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := strings.TrimPrefix(r.URL.Path, "/")
	switch r.Method {
	case http.MethodPut:
		if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
			src, _ = url.PathUnescape(strings.TrimPrefix(src, "/"))
			data, ok := f.objects[src]
			if !ok {
				notFound(w)
				return
			}
			f.objects[key] = append([]byte(nil), data...)
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><CopyObjectResult><ETag>"x"</ETag><LastModified>2026-01-01T00:00:00.000Z</LastModified></CopyObjectResult>`)
			return
		}
		data, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Encoding") == "aws-chunked" || r.Header.Get("X-Amz-Decoded-Content-Length") != "" {
			data = decodeChunked(data)
		}
		f.objects[key] = data
		w.Header().Set("ETag", `"x"`)
	case http.MethodGet, http.MethodHead:
		data, ok := f.objects[key]
		if !ok {
			notFound(w)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Header().Set("Last-Modified", "Thu, 01 Jan 2026 00:00:00 GMT")
		w.Header().Set("ETag", `"x"`)
		if r.Method == http.MethodGet {
			_, _ = w.Write(data)
		}
	case http.MethodDelete:
		delete(f.objects, key)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotImplemented)
	}
}

// decodeChunked strips aws-chunked framing ("<hex size>;...\r\n<data>\r\n").
func decodeChunked(b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		line, rest, ok := strings.Cut(string(b), "\r\n")
		if !ok {
			break
		}
		sizeHex, _, _ := strings.Cut(line, ";")
		n, err := strconv.ParseInt(sizeHex, 16, 64)
		if err != nil || n == 0 {
			break
		}
		out = append(out, rest[:n]...)
		b = []byte(rest[n+2:])
	}
	return out
}

func notFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusNotFound)
	_ = xml.NewEncoder(w).Encode(struct {
		XMLName xml.Name `xml:"Error"`
		Code    string
	}{Code: "NoSuchKey"})
}

func TestS3CompatibleByURL(t *testing.T) {
	ctx := context.Background()
	fake := &fakeS3{objects: map[string][]byte{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	u := "s3://exports?region=us-east-1&use_path_style=true&endpoint=" + url.QueryEscape(srv.URL)
	b, err := blobstore.Open(ctx, u, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAll(ctx, "p/.partial-train.jsonl", []byte("line\n"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Copy(ctx, "p/train.jsonl", "p/.partial-train.jsonl", nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "p/.partial-train.jsonl"); err != nil {
		t.Fatal(err)
	}
	got, err := b.ReadAll(ctx, "p/train.jsonl")
	if err != nil || string(got) != "line\n" {
		t.Fatalf("read back %q %v", got, err)
	}
	if _, ok := fake.objects["exports/p/.partial-train.jsonl"]; ok || len(fake.objects) != 1 {
		t.Fatalf("objects %v", fake.objects)
	}
}

func TestBadURL(t *testing.T) {
	_, err := blobstore.Open(context.Background(), "ftp://nowhere", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "CURATE_BLOB_URL") {
		t.Fatalf("bad URL: %v", err)
	}
}
