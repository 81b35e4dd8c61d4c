// Package blobstore opens the bucket that every server shares: export files,
// and uploaded import files until their run ends. It is a directory under
// the data directory by default, or any bucket URL that gocloud.dev
// understands among the drivers linked here (file:// and S3-compatible
// s3://, with endpoint and region as URL parameters).
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	// The s3:// scheme, for S3 and S3-compatible stores (MinIO, R2, ...).
	_ "gocloud.dev/blob/s3blob"
)

// Open returns the bucket named by url, or a directory bucket at
// <dataDir>/exports when url is empty. Files are never served from the
// bucket directly: the app reads them and checks who is asking.
func Open(ctx context.Context, url, dataDir string) (*blob.Bucket, error) {
	if url != "" {
		url, err := tempBeside(url)
		if err != nil {
			return nil, fmt.Errorf("CURATE_BLOB_URL: %w", err)
		}
		b, err := blob.OpenBucket(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("CURATE_BLOB_URL: %w", err)
		}
		return b, nil
	}
	return OpenDir(filepath.Join(dataDir, "exports"))
}

// tempBeside makes a file:// bucket write its temporary files beside the
// final ones, as OpenDir does, unless the URL says otherwise (no_tmp_dir).
func tempBeside(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	q := u.Query()
	if u.Scheme != fileblob.Scheme || q.Has("no_tmp_dir") {
		return raw, nil
	}
	q.Set("no_tmp_dir", "true")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// OpenDir returns a bucket over a local directory, creating it when
// missing. Objects are plain files with no metadata sidecars, so the
// directory holds exactly the stored files, and the temporary file of a
// write in progress sits beside its final name (<key>.<hex>.tmp): inside
// the directory, not in the system's temporary directory, where it could
// be on another mount (the final rename would fail) and would outlive a
// crash unseen.
func OpenDir(dir string) (*blob.Bucket, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	b, err := fileblob.OpenBucket(dir, &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true})
	if err != nil {
		return nil, fmt.Errorf("blob directory %s: %w", dir, err)
	}
	return b, nil
}

// Private, as a write's blob.WriterOptions.BeforeWrite, makes the file a
// directory bucket writes (its temporary file, renamed in place when the
// write completes) readable by its owner alone: mode 0600. Other drivers
// are left as they are.
func Private(as func(any) bool) error {
	var f *os.File
	if as(&f) {
		return f.Chmod(0o600)
	}
	return nil
}

// AbortUnfinished aborts the unfinished multipart uploads under prefix in
// an S3 bucket that began before startedBefore (every one when it is
// zero), and returns how many it aborted. An S3 write sends a large object
// in parts and makes it appear only when complete; a write cancelled after
// its first parts (a refused upload), or cut off by a crash, leaves the
// parts stored, unseen by List, until the upload is aborted: the
// uploader's own abort runs on the write's context, which the
// cancellation has ended. Other buckets keep nothing of the kind, and an
// S3-compatible server without the call has none to abort.
func AbortUnfinished(ctx context.Context, b *blob.Bucket, prefix string, startedBefore time.Time) (int, error) {
	var client *s3.Client
	if !b.As(&client) {
		return 0, nil
	}
	name := bucketName(ctx, b)
	if name == "" {
		return 0, errors.New("aborting unfinished uploads: no bucket name")
	}
	aborted := 0
	p := s3.NewListMultipartUploadsPaginator(client, &s3.ListMultipartUploadsInput{Bucket: aws.String(name), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NotImplemented" {
			return 0, nil
		}
		if err != nil {
			return aborted, fmt.Errorf("listing unfinished uploads: %w", err)
		}
		for _, u := range page.Uploads {
			if !startedBefore.IsZero() && !aws.ToTime(u.Initiated).Before(startedBefore) {
				continue
			}
			_, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(name), Key: u.Key, UploadId: u.UploadId})
			var noUpload *types.NoSuchUpload
			if err != nil && !errors.As(err, &noUpload) {
				return aborted, fmt.Errorf("aborting the unfinished upload of %s: %w", aws.ToString(u.Key), err)
			}
			aborted++
		}
	}
	return aborted, nil
}

// bucketName is an S3 bucket's name, read from the listing request the
// bucket would send (the driver gives its client, not its name); the
// request itself is not sent.
func bucketName(ctx context.Context, b *blob.Bucket) string {
	var name string
	errNotSent := errors.New("not sent")
	it := b.List(&blob.ListOptions{BeforeList: func(as func(any) bool) error {
		var v2 *s3.ListObjectsV2Input
		var v1 *s3.ListObjectsInput
		switch {
		case as(&v2):
			name = aws.ToString(v2.Bucket)
		case as(&v1):
			name = aws.ToString(v1.Bucket)
		}
		return errNotSent
	}})
	_, _ = it.Next(ctx)
	return name
}
