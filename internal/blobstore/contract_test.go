package blobstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/blobstore/s3test"
)

// What exports and imports rely on the bucket for, checked on each kind
// of bucket Curate runs on: its default directory, and an S3 bucket on a
// real S3-compatible server (SeaweedFS), reached through Open with the
// URL and credentials a deployment gives it. A file larger than the S3
// uploader's 16 MiB threshold goes up in parts, as a large export or
// import does; a cancelled one is where the real server shows what a
// fake could not: the parts it keeps.
func TestBucketsKeepWhatExportsAndImportsNeed(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	for _, kind := range []string{"directory", "s3"} {
		t.Run(kind, func(t *testing.T) {
			url := ""
			if kind == "s3" {
				url = srv.Bucket(t, "exports")
			}
			b, err := blobstore.Open(ctx, url, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			// keys lists the bucket under prefix as the app does, and,
			// for S3, checks the server holds exactly those objects.
			keys := func(t *testing.T, prefix string) []string {
				t.Helper()
				var got []string
				it := b.List(&blob.ListOptions{Prefix: prefix})
				for {
					obj, err := it.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, obj.Key)
				}
				if kind == "s3" {
					if raw := srv.Keys(t, "exports", prefix); !slices.Equal(raw, got) {
						t.Fatalf("the server holds %v; the bucket lists %v", raw, got)
					}
				}
				return got
			}

			t.Run("stored whole", func(t *testing.T) {
				small := []byte("{\"prompt\":\"hi\"}\n")
				large := pseudoRandom(20 << 20)
				for key, data := range map[string][]byte{"o/d/e/train.jsonl": small, "o/d/e/validation.jsonl": large} {
					// As an export stores a finished file.
					err := b.Upload(ctx, key, bytes.NewReader(data), &blob.WriterOptions{ContentType: "application/jsonl", BeforeWrite: blobstore.Private})
					if err != nil {
						t.Fatalf("%s: %v", key, err)
					}
				}
				for key, data := range map[string][]byte{"o/d/e/train.jsonl": small, "o/d/e/validation.jsonl": large} {
					r, err := b.NewReader(ctx, key, nil)
					if err != nil {
						t.Fatal(err)
					}
					got, err := io.ReadAll(r)
					r.Close()
					if err != nil || r.Size() != int64(len(data)) || sha256.Sum256(got) != sha256.Sum256(data) {
						t.Fatalf("%s: read back %d bytes (size %d, %v); stored %d", key, len(got), r.Size(), err, len(data))
					}
				}
				if got := keys(t, "o/d/e/"); !slices.Equal(got, []string{"o/d/e/train.jsonl", "o/d/e/validation.jsonl"}) {
					t.Fatalf("listed %v", got)
				}
			})

			t.Run("a cancelled write leaves nothing", func(t *testing.T) {
				// As an import's upload that is refused or broken off:
				// one written in one request, and one already sent in
				// parts, whose parts S3 keeps until they are aborted.
				for key, size := range map[string]int{"uploads/o/small": 1 << 10, "uploads/o/large": 20 << 20} {
					wctx, cancel := context.WithCancel(ctx)
					w, err := b.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream", BeforeWrite: blobstore.Private})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := w.Write(pseudoRandom(size)); err != nil {
						t.Fatalf("%s: %v", key, err)
					}
					cancel()
					if err := w.Close(); err == nil {
						t.Fatalf("%s: a cancelled write closed without an error", key)
					}
					if ok, err := b.Exists(ctx, key); ok || err != nil {
						t.Fatalf("%s: exists %v (%v) after a cancelled write", key, ok, err)
					}
				}
				if got := keys(t, "uploads/"); len(got) != 0 {
					t.Fatalf("left %v", got)
				}
				unfinished := func() int {
					if kind != "s3" {
						return 0
					}
					out, err := srv.Client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("exports")})
					if err != nil {
						t.Fatal(err)
					}
					return len(out.Uploads)
				}
				want := map[string]int{"directory": 0, "s3": 1}[kind]
				if n := unfinished(); n != want {
					t.Fatalf("%d unfinished uploads; want %d", n, want)
				}
				// Those begun later, or under another prefix, are left.
				if n, err := blobstore.AbortUnfinished(ctx, b, "uploads/", time.Now().Add(-time.Hour)); n != 0 || err != nil {
					t.Fatalf("aborted %d begun in the last hour (%v)", n, err)
				}
				if n, err := blobstore.AbortUnfinished(ctx, b, "o/", time.Time{}); n != 0 || err != nil {
					t.Fatalf("aborted %d under another prefix (%v)", n, err)
				}
				if n, err := blobstore.AbortUnfinished(ctx, b, "uploads/", time.Time{}); n != want || err != nil {
					t.Fatalf("aborted %d (%v); want %d", n, err, want)
				}
				if n := unfinished(); n != 0 {
					t.Fatalf("%d unfinished uploads left", n)
				}
			})

			t.Run("listed with the time written", func(t *testing.T) {
				// The sweep of abandoned uploads deletes by this time.
				before := time.Now()
				if err := b.WriteAll(ctx, "uploads/o/run", []byte("a,b\n"), nil); err != nil {
					t.Fatal(err)
				}
				after := time.Now()
				it := b.List(&blob.ListOptions{Prefix: "uploads/"})
				obj, err := it.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				// The server may keep whole seconds, and its clock is this
				// machine's.
				if obj.Key != "uploads/o/run" || obj.ModTime.Before(before.Add(-2*time.Second)) || obj.ModTime.After(after.Add(2*time.Second)) {
					t.Fatalf("listed %s modified %v; written between %v and %v", obj.Key, obj.ModTime, before, after)
				}
				if err := b.Delete(ctx, "uploads/o/run"); err != nil {
					t.Fatal(err)
				}
			})

			t.Run("missing keys are not found", func(t *testing.T) {
				// An import whose upload the sweep took, and deleting what
				// is already gone, tell NotFound from other failures.
				if _, err := b.NewReader(ctx, "uploads/o/gone", nil); gcerrors.Code(err) != gcerrors.NotFound {
					t.Fatalf("reading a missing key: %v", err)
				}
				if err := b.Delete(ctx, "uploads/o/gone"); gcerrors.Code(err) != gcerrors.NotFound {
					t.Fatalf("deleting a missing key: %v", err)
				}
			})
		})
	}
}

// The S3 server checks every request's signature, so the tests above ran
// signed with the credentials a deployment sets: another secret is refused.
func TestS3RefusesAnotherSecret(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	url := srv.Bucket(t, "exports")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-"+srv.SecretKey)
	b, err := blobstore.Open(ctx, url, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.WriteAll(ctx, "o/x", []byte("x"), nil)
	if err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Fatalf("a write signed with another secret: %v; want the server's SignatureDoesNotMatch", err)
	}
	if keys := srv.Keys(t, "exports", ""); len(keys) != 0 {
		t.Fatalf("stored %v", keys)
	}
}

// pseudoRandom returns n bytes that do not compress, the same each run.
func pseudoRandom(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}
