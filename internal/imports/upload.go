package imports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/errs"
)

// uploadsPrefix is where uploads wait in the bucket, apart from exports.
const uploadsPrefix = "uploads/"

// UploadGrace is how old a blob under uploads/ must be before the sweep
// may delete it (SweepUploads): far longer than an upload takes to arrive
// and have its run recorded, or a running import goes without reporting
// progress.
const UploadGrace = 24 * time.Hour

// UploadKey is where an uploaded file waits for its run in the bucket.
func UploadKey(orgID, runID uuid.UUID) string {
	return uploadsPrefix + orgID.String() + "/" + runID.String()
}

// errUploadGone: the run's file is no longer in the bucket (its run ended,
// or the sweep took it); no retry would find it.
var errUploadGone = fmt.Errorf("the uploaded file is no longer kept; upload it again: %w", os.ErrNotExist)

// keep streams an upload into the bucket under key, at most MaxUpload
// bytes, and returns its size; an empty upload is not kept. The blob
// appears under key only once the whole upload is written: the bucket
// commits a write on Close (a directory bucket renames its temporary file
// beside the key, S3 completes the upload), and cancelling the write
// first discards it, so a refused or broken upload leaves nothing, and the
// import job, queued only after keep returns, never sees part of a file.
func (s *Service) keep(ctx context.Context, key string, body io.Reader) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.Bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream", BeforeWrite: blobstore.Private})
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, io.LimitReader(body, MaxUpload+1))
	if err == nil && n > MaxUpload {
		err = errs.InvalidField("file", "is larger than %d MiB", MaxUpload>>20)
	}
	if err != nil || n == 0 {
		cancel()
		_ = w.Close()
		// An S3 write cancelled after it sent parts leaves them behind.
		if _, aerr := blobstore.AbortUnfinished(context.WithoutCancel(ctx), s.Bucket, key, time.Time{}); aerr != nil {
			s.Log.Warn("aborting a refused upload's parts", "key", key, "err", aerr)
		}
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("keeping the upload: %w", err)
	}
	return n, nil
}

// openUpload opens the upload at key for one pass of its import.
func (s *Service) openUpload(key string) opener {
	return func(ctx context.Context) (io.ReadCloser, error) {
		r, err := s.Bucket.NewReader(ctx, key, nil)
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, errUploadGone
		}
		return r, err
	}
}

// discard deletes the upload at key, even when ctx is done (the run ended
// as the worker was stopped).
func (s *Service) discard(ctx context.Context, key string) {
	err := s.Bucket.Delete(context.WithoutCancel(ctx), key)
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		s.Log.Warn("deleting an upload", "key", key, "err", err)
	}
}

// SweepUploads deletes what uploads left in the bucket that nothing will
// read, last changed before the cutoff: a file whose run has ended or
// never was recorded (the server stopped between keeping it and recording
// its run), a run's file whose worker died (running, with no progress since
// the cutoff: an import job times out long before), and a write's
// temporary file that a crash left behind, and, in an S3 bucket, the parts
// of an upload that a crash cut off. A queued run's file stays however
// old, for its job is still to come. It returns how many blobs it deleted
// and unfinished uploads it aborted.
func (s *Service) SweepUploads(ctx context.Context, cutoff time.Time) (int, error) {
	var stale []string
	it := s.Bucket.List(&blob.ListOptions{Prefix: uploadsPrefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("listing uploads: %w", err)
		}
		if obj.IsDir || !obj.ModTime.Before(cutoff) {
			continue
		}
		inUse, err := s.uploadInUse(ctx, obj.Key, cutoff)
		if err != nil {
			return 0, err
		}
		if !inUse {
			stale = append(stale, obj.Key)
		}
	}
	deleted := 0
	for _, key := range stale {
		err := s.Bucket.Delete(ctx, key)
		if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return deleted, fmt.Errorf("deleting %s: %w", key, err)
		}
		deleted++
	}
	aborted, err := blobstore.AbortUnfinished(ctx, s.Bucket, uploadsPrefix, cutoff)
	deleted += aborted
	if err != nil {
		return deleted, err
	}
	if deleted > 0 {
		s.Log.Info("deleted abandoned uploads", "count", deleted)
	}
	return deleted, nil
}

// uploadInUse reports whether the blob at key is the file of a run that
// may still read it.
func (s *Service) uploadInUse(ctx context.Context, key string, cutoff time.Time) (bool, error) {
	org, run, ok := strings.Cut(strings.TrimPrefix(key, uploadsPrefix), "/")
	orgID, oerr := uuid.Parse(org)
	runID, rerr := uuid.Parse(run)
	if !ok || oerr != nil || rerr != nil {
		return false, nil // a temporary file, or not an upload at all
	}
	r, err := s.GetRun(ctx, orgID, runID)
	if errors.Is(err, errs.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch r.Status {
	case StatusQueued:
		return true, nil
	case StatusRunning:
		return r.UpdatedAt.After(cutoff), nil
	}
	return false, nil
}
