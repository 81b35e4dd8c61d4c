// Package blobstore opens the bucket that every server shares: export files,
// and uploaded import files until their run ends. It is a directory under
// the data directory by default, or any bucket URL that gocloud.dev
// understands among the drivers linked here (file:// and S3-compatible
// s3://, with endpoint and region as URL parameters).
package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

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
