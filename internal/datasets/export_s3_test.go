package datasets_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/blobstore/s3test"
	"github.com/curate/curate/internal/datasets"
)

// On an S3 bucket (a real S3-compatible server), a retried export also
// aborts the upload a killed try left unfinished under its prefix: S3
// keeps its parts unlisted, so removing the listed objects is not enough.
func TestRetriedExportOnS3AbortsUnfinishedUploads(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	srv := s3test.Start(t)
	bucket, err := blobstore.Open(ctx, srv.Bucket(t, "exports"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	e.svc.Bucket = bucket
	d, _ := frozenPairs(t, e)
	ex, _, err := e.svc.StartExport(ctx, e.actor, e.org, d.ID, datasets.ExportRequest{Format: "trl_preference", MaskPII: true})
	if err != nil {
		t.Fatal(err)
	}
	prefix := datasets.ExportPrefix(ex)
	key := aws.String(prefix + "train.jsonl")
	mp, err := srv.Client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("exports"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("exports"), Key: key, UploadId: mp.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, 5<<20))}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RunExport(ctx, ex.ID); err != nil {
		t.Fatal(err)
	}
	if keys := srv.Keys(t, "exports", prefix); strings.Join(keys, ",") != prefix+"manifest.json,"+prefix+"train.jsonl,"+prefix+"validation.jsonl" {
		t.Fatalf("the export's prefix holds %v", keys)
	}
	out, err := srv.Client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("exports")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 0 {
		t.Fatalf("%d unfinished uploads left under the export's prefix", len(out.Uploads))
	}
}
