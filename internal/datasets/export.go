package datasets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/scratch"
)

// ErrBlocked marks an export refused by its validation report: invalid
// data does not get better on a retry.
var ErrBlocked = errors.New("the validation report blocks this export")

// ManifestName is the name of the manifest beside an export's data files.
const ManifestName = "manifest.json"

// Splits are the data files of an export, in the order they are written.
var Splits = []string{"train", "validation"}

// ExportArgs asks for one recorded dataset export to be written. StartExport
// inserts it with the export's row; the worker in package jobs runs
// RunExport.
type ExportArgs struct {
	ExportID uuid.UUID `json:"export_id"`
}

// Kind names the job in River's table.
func (ExportArgs) Kind() string { return "dataset_export" }

// InsertOpts: a failed write is retried a few times; each try starts the
// files afresh, so a retry never leaves a mix of two tries.
func (ExportArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 3}
}

// ExportRequest asks for an export of a dataset's current version.
type ExportRequest struct {
	// Format names the format, or one of its aliases (export.Aliases);
	// "" is the dataset's own export_format.
	Format string
	// MaskPII replaces personal data with its kind ("[EMAIL]"). Turning it
	// off is for admins only, and is recorded in the audit log.
	MaskPII bool
	Admin   bool // the caller is an admin
}

// DefaultSyncValidationLimit is the largest version whose preflight
// StartExport also runs in the request, so the caller hears of a blocked
// export at once. Counting tokens takes about a quarter of a millisecond
// per example, so larger versions are only checked by the export job,
// which fails with the same errors.
const DefaultSyncValidationLimit = 20000

func (s *Service) syncValidationLimit() int32 {
	if s.SyncValidationLimit > 0 {
		return int32(s.SyncValidationLimit)
	}
	return DefaultSyncValidationLimit
}

// exportPlan is what one export writes: a frozen version of a dataset, in
// a format, with PII masked or not.
type exportPlan struct {
	dataset db.TrainingDataset
	version db.DatasetVersion
	format  export.Format
	maskPII bool
}

func (p exportPlan) details() map[string]any {
	return map[string]any{"format": p.format, "version": p.version.Number, "content_hash": p.version.ContentHash, "mask_pii": p.maskPII}
}

// planExport checks a request for an export: a known format, PII masked
// unless the caller is an admin, and a dataset that is ready or exported,
// so that it has a frozen version to write.
func (s *Service) planExport(ctx context.Context, orgID, id uuid.UUID, req ExportRequest) (exportPlan, error) {
	if !req.MaskPII && !req.Admin {
		return exportPlan{}, fmt.Errorf("exporting without PII masking: %w", errs.ErrForbidden)
	}
	d, err := s.Get(ctx, orgID, id)
	if err != nil {
		return exportPlan{}, err
	}
	name := req.Format
	if strings.TrimSpace(name) == "" {
		name = d.Dataset.ExportFormat
	}
	f, err := export.ParseFormatFor(name, export.Kind(KindOf(string(d.Dataset.DatasetType))))
	if err != nil {
		return exportPlan{}, errs.InvalidField("format", "%v", err)
	}
	if err := exportable(string(d.Dataset.Status)); err != nil {
		return exportPlan{}, err
	}
	if d.Current == nil {
		return exportPlan{}, &errs.Conflict{Message: "the dataset has no frozen version: mark it ready first"}
	}
	return exportPlan{dataset: d.Dataset, version: *d.Current, format: f, maskPII: req.MaskPII}, nil
}

// preflight is the one check every export passes before it writes a byte,
// the export job and the command line alike: the validation report of the
// version in the format, with the examples as the export writes them. A
// report with errors blocks the export: the error wraps ErrBlocked and an
// errs.Invalid with one entry per error code ("report.too_few_examples").
func preflight(ctx context.Context, pool *pgxpool.Pool, p exportPlan) (Report, error) {
	rep, err := validateVersion(ctx, pool, p.version, p.format, p.dataset.BaseModel, p.maskPII)
	if err != nil {
		return Report{}, err
	}
	if err := blocking(rep); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrBlocked, err)
	}
	return rep, nil
}

// recordQuality keeps an export's quality score on the dataset, which its
// list shows: the score of the current version in the target format, as
// exported (PII masked). Other exports leave it alone.
func recordQuality(ctx context.Context, q *db.Queries, p exportPlan, rep Report) error {
	if !p.maskPII {
		return nil
	}
	return q.DatasetUpdateQuality(ctx, db.DatasetUpdateQualityParams{OrgID: p.dataset.OrgID, ID: p.dataset.ID,
		VersionID: uuid.NullUUID{UUID: p.version.ID, Valid: true}, ExportFormat: string(p.format), QualityScore: float4(rep.QualityScore)})
}

// StartExport records an export of the dataset's current version and
// inserts its job in the same transaction, so there is never an export
// without its job or the reverse. The request is checked first (see
// planExport); a version small enough is also put through the preflight
// here, so a blocked export is refused at once with the report, nothing
// recorded.
func (s *Service) StartExport(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, req ExportRequest) (db.DatasetExport, Report, error) {
	p, err := s.planExport(ctx, orgID, id, req)
	if err != nil {
		return db.DatasetExport{}, Report{}, err
	}
	var rep Report
	if p.version.ItemCount <= s.syncValidationLimit() {
		if rep, err = preflight(ctx, s.Pool, p); err != nil {
			return db.DatasetExport{}, rep, err
		}
	}
	var out db.DatasetExport
	err = db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		var err error
		out, err = q.ExportInsert(ctx, db.ExportInsertParams{OrgID: orgID, DatasetID: id, VersionID: p.version.ID,
			Format: string(p.format), MaskPii: p.maskPII, RowsTotal: p.version.ItemCount, CreatedByLabel: actor.Label})
		if err != nil {
			return err
		}
		details := p.details()
		details["export_id"] = out.ID
		if err := audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "dataset.export", TargetType: "dataset", TargetID: id.String(), Details: details}); err != nil {
			return err
		}
		if !p.maskPII {
			if err := audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "dataset.export_unmasked", TargetType: "dataset", TargetID: id.String(), Details: details}); err != nil {
				return err
			}
		}
		_, err = s.Jobs.InsertTx(ctx, tx, ExportArgs{ExportID: out.ID}, nil)
		return err
	})
	return out, rep, err
}

// blocking turns a report's errors into errs.Invalid, one entry per code.
func blocking(r Report) error {
	if !r.Blocking() {
		return nil
	}
	v := &errs.Invalid{}
	for _, c := range r.Findings {
		if c.Severity != "error" {
			continue
		}
		msg := fmt.Sprintf("%d findings", c.Count)
		if c.Count == 1 {
			msg = "1 finding"
		}
		if len(c.Samples) > 0 {
			msg += ", e.g. " + c.Samples[0].Message
		}
		v.Add("report."+c.Code, "%s", msg)
	}
	return v
}

// RunExport does the work of an export's job: it puts the version through
// the preflight, writes the files under the export's own prefix in the
// bucket, records the manifest and the quality score, and marks the dataset
// exported. A finished export is left alone, so a repeated job does nothing
// twice.
func (s *Service) RunExport(ctx context.Context, exportID uuid.UUID) error {
	q := db.New(s.Pool)
	e, err := q.ExportGetByID(ctx, exportID)
	if err != nil {
		return fmt.Errorf("export %s: %w", exportID, errs.NotFound(err))
	}
	if e.Status == db.ExportStatusSucceeded {
		return nil
	}
	if err := q.ExportUpdateStarted(ctx, e.ID); err != nil {
		return err
	}
	fail := func(err error) error {
		if ctx.Err() == nil {
			_ = q.ExportUpdateFailed(context.WithoutCancel(ctx), db.ExportUpdateFailedParams{ID: e.ID, Error: err.Error()})
		}
		return err
	}
	ver, err := q.DatasetVersionGet(ctx, db.DatasetVersionGetParams{OrgID: e.OrgID, ID: e.VersionID})
	if err != nil {
		return fail(err)
	}
	d, err := q.DatasetGet(ctx, db.DatasetGetParams{OrgID: e.OrgID, ID: e.DatasetID})
	if err != nil {
		return fail(err)
	}
	p := exportPlan{dataset: d.TrainingDataset, version: ver, format: export.Format(e.Format), maskPII: e.MaskPii}
	rep, err := preflight(ctx, s.Pool, p)
	if err != nil {
		return fail(err)
	}
	prefix := ExportPrefix(e)
	// A retry starts over. What an earlier try left under the prefix (an
	// object half stored when its process died, files stored before the
	// export could be recorded) is not part of this export.
	if err := clearPrefix(ctx, s.Bucket, prefix); err != nil {
		return fail(err)
	}
	progress := func(done int) error {
		return q.ExportUpdateProgress(ctx, db.ExportUpdateProgressParams{ID: e.ID, RowsDone: int32(done)})
	}
	m, err := WriteFiles(ctx, s.Pool, s.Bucket, s.Scratch, prefix, ver, p.format, p.maskPII, progress)
	if err != nil {
		return fail(err)
	}
	mj, err := json.Marshal(m)
	if err != nil {
		return fail(err)
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.ExportUpdateFinished(ctx, db.ExportUpdateFinishedParams{ID: e.ID, StoragePrefix: prefix, Manifest: mj}); err != nil {
			return err
		}
		if err := q.DatasetUpdateExported(ctx, e.DatasetID); err != nil {
			return err
		}
		if err := recordQuality(ctx, q, p, rep); err != nil {
			return err
		}
		return audit.Record(ctx, q, audit.System, audit.Entry{OrgID: e.OrgID, Action: "dataset.export_finished", TargetType: "dataset",
			TargetID: e.DatasetID.String(), Details: map[string]any{"export_id": e.ID, "format": e.Format, "rows": ver.ItemCount}})
	})
}

// AbandonExport fails an export whose job was given up while it ran (its
// worker died on the job's last attempt) and removes what the dead try
// left under its prefix. A finished export is left alone.
func (s *Service) AbandonExport(ctx context.Context, exportID uuid.UUID, reason string) error {
	q := db.New(s.Pool)
	e, err := q.ExportGetByID(ctx, exportID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if e.Status == db.ExportStatusSucceeded || e.Status == db.ExportStatusFailed {
		return nil
	}
	if err := clearPrefix(ctx, s.Bucket, ExportPrefix(e)); err != nil {
		return err
	}
	return q.ExportUpdateFailed(ctx, db.ExportUpdateFailedParams{ID: e.ID, Error: reason})
}

// ExportPrefix is where an export's files live in the bucket.
func ExportPrefix(e db.DatasetExport) string {
	return fmt.Sprintf("%s/%s/%s/", e.OrgID, e.DatasetID, e.ID)
}

// Querier is what reading a version needs: the pool, or a transaction.
type Querier = db.DBTX

// progressEvery is how often (in rows) an export reports progress.
const progressEvery = 1000

// WriteFiles writes one export of a version: train and validation files of
// the format, then manifest.json, under prefix in bucket. Rows stream from
// Postgres a keyset page at a time into the format's writer, so memory
// stays flat whatever the size.
//
// Each data file is first written whole to a fresh file in tmp (the
// process's scratch directory, inside the data directory, mode 0600), and
// the files are stored in the bucket only once every one is complete,
// manifest last: whoever finds the manifest finds every file. A failed
// export removes its scratch files and what it had stored; one whose
// process is killed leaves its scratch files to the next process started
// on the data directory (see package scratch), and under prefix at most
// files being stored, which RunExport clears before a retry.
//
// The same version, format and masking always give the same bytes, the
// manifest included (it carries the version's time, not the export's).
// progress, when set, is called every 1000 rows with the rows written so
// far.
func WriteFiles(ctx context.Context, dbtx Querier, bucket *blob.Bucket, tmp *scratch.Dir, prefix string, ver db.DatasetVersion, f export.Format, maskPII bool, progress func(done int) error) (export.Manifest, error) {
	q := db.New(dbtx)
	m := export.Manifest{Format: f, DatasetVersion: ver.ContentHash, SplitSeed: ver.SplitSeed,
		Counts: map[string]int{}, CreatedAt: ver.CreatedAt}
	var partial []*os.File
	defer func() {
		for _, file := range partial {
			file.Close()
			os.Remove(file.Name())
		}
	}()
	done := 0
	for _, split := range Splits {
		name := split + f.Ext()
		file, err := tmp.CreateTemp("export-*-" + name)
		if err != nil {
			return export.Manifest{}, err
		}
		partial = append(partial, file)
		mf, rows, err := writeSplit(ctx, q, file, ver, split, f, maskPII, func() error {
			done++
			if progress != nil && done%progressEvery == 0 {
				return progress(done)
			}
			return nil
		})
		if err != nil {
			return export.Manifest{}, fmt.Errorf("writing %s: %w", name, err)
		}
		mf.Name = name
		m.Files = append(m.Files, mf)
		m.Counts[split] = rows
	}
	var manifest bytes.Buffer
	if err := m.Encode(&manifest); err != nil {
		return export.Manifest{}, err
	}
	// Every file is complete: store them under their final names.
	var stored []string
	fail := func(err error) (export.Manifest, error) {
		for _, key := range stored {
			_ = bucket.Delete(context.WithoutCancel(ctx), key)
		}
		return export.Manifest{}, err
	}
	for i, file := range partial {
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			return fail(err)
		}
		key := prefix + m.Files[i].Name
		if err := store(ctx, bucket, key, file, f.ContentType()); err != nil {
			return fail(fmt.Errorf("storing %s: %w", m.Files[i].Name, err))
		}
		stored = append(stored, key)
	}
	if err := store(ctx, bucket, prefix+ManifestName, &manifest, "application/json"); err != nil {
		return fail(fmt.Errorf("storing %s: %w", ManifestName, err))
	}
	if progress != nil {
		if err := progress(done); err != nil {
			return export.Manifest{}, err
		}
	}
	return m, nil
}

// store writes one complete file to the bucket, readable by Curate's user
// only where the bucket is a directory.
func store(ctx context.Context, bucket *blob.Bucket, key string, r io.Reader, contentType string) error {
	return bucket.Upload(ctx, key, r, &blob.WriterOptions{ContentType: contentType, BeforeWrite: blobstore.Private})
}

// clearPrefix removes every object under prefix, and the parts of any
// upload under it that never completed (S3 keeps them unlisted).
func clearPrefix(ctx context.Context, bucket *blob.Bucket, prefix string) error {
	if _, err := blobstore.AbortUnfinished(ctx, bucket, prefix, time.Time{}); err != nil {
		return err
	}
	it := bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return err
		}
	}
}

func writeSplit(ctx context.Context, q *db.Queries, w io.Writer, ver db.DatasetVersion, split string, f export.Format, maskPII bool, row func() error) (export.ManifestFile, int, error) {
	hw := export.NewHashingWriter(w)
	var opts export.Options
	if f == export.Parquet && ver.Kind == KindSFT {
		// Rubric answers get a column when any example carries them.
		n, err := q.DatasetVersionItemCountRubricAnswered(ctx, ver.ID)
		if err != nil {
			return export.ManifestFile{}, 0, err
		}
		opts.RubricAnswers = n > 0
	}
	ew, err := export.NewWriterWith(f, hw, export.Kind(ver.Kind), opts)
	if err != nil {
		return export.ManifestFile{}, 0, err
	}
	rows := 0
	var prepare func(Example) Example
	if maskPII {
		prepare = Example.Masked
	}
	err = eachVersionItem(ctx, q, ver.ID, split, prepare, func(e Example) error {
		var err error
		if ver.Kind == KindPreference {
			err = ew.WritePref(e.Pref())
		} else {
			err = ew.WriteSFT(e.SFT())
		}
		if err != nil {
			return fmt.Errorf("example %d: %w", rows+1, err)
		}
		rows++
		return row()
	})
	if err == nil {
		err = ew.Close()
	}
	if err != nil {
		return export.ManifestFile{}, 0, err
	}
	return hw.File(split+f.Ext(), split, rows), rows, nil
}

// Export returns one export of the organisation's dataset, or
// errs.ErrNotFound.
func (s *Service) Export(ctx context.Context, orgID, datasetID, exportID uuid.UUID) (db.DatasetExport, error) {
	e, err := db.New(s.Pool).ExportGet(ctx, db.ExportGetParams{OrgID: orgID, ID: exportID})
	if err != nil {
		return db.DatasetExport{}, errs.NotFound(err)
	}
	if e.DatasetID != datasetID {
		return db.DatasetExport{}, errs.ErrNotFound
	}
	return e, nil
}

// File is an export's file opened for download.
type File struct {
	io.ReadCloser
	Name        string
	Size        int64
	ContentType string
}

// OpenFile opens one file of a finished export of the organisation's
// dataset: a data file named in its manifest, or the manifest itself.
func (s *Service) OpenFile(ctx context.Context, orgID, datasetID, exportID uuid.UUID, name string) (File, error) {
	e, err := s.Export(ctx, orgID, datasetID, exportID)
	if err != nil {
		return File{}, err
	}
	if e.Status != db.ExportStatusSucceeded {
		return File{}, &errs.Conflict{Message: fmt.Sprintf("the export is %s; its files can be downloaded once it has succeeded", e.Status)}
	}
	var m export.Manifest
	if err := json.Unmarshal(e.Manifest, &m); err != nil {
		return File{}, err
	}
	names := []string{ManifestName}
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	if !slices.Contains(names, name) {
		return File{}, errs.ErrNotFound
	}
	r, err := s.Bucket.NewReader(ctx, e.StoragePrefix+name, nil)
	if err != nil {
		return File{}, fmt.Errorf("opening %s: %w", name, err)
	}
	ct := "application/json"
	if name != ManifestName {
		ct = export.Format(e.Format).ContentType()
	}
	return File{ReadCloser: r, Name: name, Size: r.Size(), ContentType: ct}, nil
}

// FileNames lists an export's downloadable files: data files then the
// manifest; none until it has succeeded.
func FileNames(e db.DatasetExport) []string {
	if e.Status != db.ExportStatusSucceeded || len(e.Manifest) == 0 {
		return nil
	}
	var m export.Manifest
	if json.Unmarshal(e.Manifest, &m) != nil {
		return nil
	}
	var out []string
	for _, f := range m.Files {
		out = append(out, f.Name)
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(splitOrder(a), splitOrder(b)) })
	return append(out, ManifestName)
}

func splitOrder(name string) string {
	if strings.HasPrefix(name, "train") {
		return "0" + name
	}
	return "1" + name
}

// OrgOf returns the organisation of a dataset named by id alone, for the
// command line.
func (s *Service) OrgOf(ctx context.Context, id uuid.UUID) (uuid.UUID, error) {
	org, err := db.New(s.Pool).DatasetGetOrgID(ctx, id)
	if err != nil {
		return uuid.Nil, fmt.Errorf("dataset %s: %w", id, errs.NotFound(err))
	}
	return org, nil
}

// ExportTo writes an export of the dataset's current version straight to
// a bucket (the command line's output directory), with the same checks as
// StartExport, the same preflight as the export job and the same files.
// The export is audited but not recorded as a stored export.
func (s *Service) ExportTo(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, req ExportRequest, bucket *blob.Bucket, progress func(done int) error) (export.Manifest, Report, error) {
	p, err := s.planExport(ctx, orgID, id, req)
	if err != nil {
		return export.Manifest{}, Report{}, err
	}
	rep, err := preflight(ctx, s.Pool, p)
	if err != nil {
		return export.Manifest{}, rep, err
	}
	m, err := WriteFiles(ctx, s.Pool, bucket, s.Scratch, "", p.version, p.format, p.maskPII, progress)
	if err != nil {
		return export.Manifest{}, rep, err
	}
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := recordQuality(ctx, q, p, rep); err != nil {
			return err
		}
		details := p.details()
		if err := audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "dataset.export_local", TargetType: "dataset", TargetID: id.String(), Details: details}); err != nil {
			return err
		}
		if p.maskPII {
			return nil
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "dataset.export_unmasked", TargetType: "dataset", TargetID: id.String(), Details: details})
	})
	return m, rep, err
}
