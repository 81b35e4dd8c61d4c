// Package blobstore opens the bucket where export files are kept: a
// directory under the data directory by default, or any bucket URL that
// gocloud.dev understands among the drivers linked here (file:// and
// S3-compatible s3://, with endpoint and region as URL parameters).
package blobstore

import (
	"context"
	"fmt"
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
		b, err := blob.OpenBucket(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("CURATE_BLOB_URL: %w", err)
		}
		return b, nil
	}
	return OpenDir(filepath.Join(dataDir, "exports"))
}

// OpenDir returns a bucket over a local directory, creating it when
// missing. Objects are plain files with no metadata sidecars, so the
// directory holds exactly the exported files.
func OpenDir(dir string) (*blob.Bucket, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("export directory: %w", err)
	}
	b, err := fileblob.OpenBucket(dir, &fileblob.Options{Metadata: fileblob.MetadataDontWrite})
	if err != nil {
		return nil, fmt.Errorf("export directory %s: %w", dir, err)
	}
	return b, nil
}
