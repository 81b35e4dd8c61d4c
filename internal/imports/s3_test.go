package imports_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/blobstore/s3test"
	"github.com/curate/curate/internal/imports"
)

// brokenBody sends n bytes and then fails, as a client that drops its
// connection halfway through an upload.
type brokenBody struct{ r io.Reader }

func (b brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, errors.New("connection reset")
	}
	return n, err
}

// In an S3 bucket on a real S3-compatible server: an upload broken off
// after 20 MiB, which S3 had taken in parts, leaves no object and no
// parts, and the sweep aborts the parts of an upload a crash cut off once
// it is older than the cutoff, and not before.
func TestUploadPartsOnS3(t *testing.T) {
	e := newEnv(t)
	srv := s3test.Start(t)
	bucket, err := blobstore.Open(e.ctx, srv.Bucket(t, "curate"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	e.svc.Bucket = bucket
	unfinished := func() []string {
		t.Helper()
		out, err := srv.Client.ListMultipartUploads(e.ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("curate")})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, u := range out.Uploads {
			keys = append(keys, aws.ToString(u.Key))
		}
		return keys
	}

	body := brokenBody{bytes.NewReader(make([]byte, 20<<20))}
	if _, err := e.svc.Start(e.ctx, audit.System, imports.NewRun{OrgID: e.orgID, Kind: imports.KindJSONL, FileName: "big.jsonl", Body: body}); err == nil {
		t.Fatal("a broken upload started a run")
	}
	if keys, parts := srv.Keys(t, "curate", ""), unfinished(); len(keys) != 0 || len(parts) != 0 {
		t.Fatalf("a broken upload left objects %v and unfinished uploads %v", keys, parts)
	}

	// A crash after the first part: the upload is begun, never finished.
	key := imports.UploadKey(e.orgID, uuid.New())
	mp, err := srv.Client.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("curate"), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: aws.String("curate"), Key: aws.String(key), UploadId: mp.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, 5<<20))}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.svc.SweepUploads(e.ctx, time.Now().Add(-imports.UploadGrace)); n != 0 || err != nil {
		t.Fatalf("a sweep a day back: %d swept (%v); want none", n, err)
	}
	if parts := unfinished(); len(parts) != 1 || parts[0] != key {
		t.Fatalf("unfinished uploads %v; want %s's", parts, key)
	}
	// Seen from a day later.
	if n, err := e.svc.SweepUploads(e.ctx, time.Now().Add(time.Minute)); n != 1 || err != nil {
		t.Fatalf("a sweep past the upload's start: %d swept (%v); want 1", n, err)
	}
	if parts := unfinished(); len(parts) != 0 {
		t.Fatalf("unfinished uploads %v after the sweep", parts)
	}
}
