// Package blobstore opens the bucket where export files are kept: a
// directory under the data directory by default, or any bucket URL that
// gocloud.dev understands among the drivers linked here (file:// and
// S3-compatible s3://, with endpoint and region as URL parameters).
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
func Open(ctx context.Context, rawURL, dataDir string) (*blob.Bucket, error) {
	if rawURL != "" {
		b, err := blob.OpenBucket(ctx, inPlace(rawURL))
		if err != nil {
			return nil, fmt.Errorf("CURATE_BLOB_URL: %w", err)
		}
		return b, nil
	}
	return OpenDir(filepath.Join(dataDir, "exports"))
}

// inPlace asks a file:// bucket to stage each object it writes beside the
// object rather than in the system's temporary directory, where a process
// killed mid-write would leave it outside the bucket for good. Other
// schemes are left as they are.
func inPlace(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "file" {
		return rawURL // blob.OpenBucket reports the bad URL
	}
	q := u.Query()
	if q.Get("no_tmp_dir") == "" {
		q.Set("no_tmp_dir", "1")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// OpenDir returns a bucket over a local directory, creating it when
// missing. Objects are plain files with no metadata sidecars, so the
// directory holds exactly the exported files; an object being written is
// staged beside its final name (never in the system's /tmp), and objects
// written with Private are readable by Curate's user only.
func OpenDir(dir string) (*blob.Bucket, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("export directory: %w", err)
	}
	b, err := fileblob.OpenBucket(dir, &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true, DirFileMode: 0o750})
	if err != nil {
		return nil, fmt.Errorf("export directory %s: %w", dir, err)
	}
	return b, nil
}

// Private is a blob.WriterOptions.BeforeWrite: in a directory bucket it
// makes the file being written (staged, then renamed to its final name)
// readable and writable by its owner only, whatever the umask. Other
// buckets keep their own access rules.
func Private(as func(any) bool) error {
	var f *os.File
	if as(&f) {
		return f.Chmod(0o600)
	}
	return nil
}
