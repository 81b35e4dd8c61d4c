package imports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/importfile"
)

// Run statuses and phases, as the import_runs row has them.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"

	PhaseChecking = "checking" // reading the whole file to validate it
	PhaseStoring  = "storing"  // reading it again to store it
)

const (
	// MaxUpload bounds an uploaded file.
	MaxUpload = 200 << 20
	// batchSize is how many records go to the database in one statement.
	batchSize = 1000
	// progressEvery bounds how often progress is written to the run's row.
	progressEvery = 250 * time.Millisecond
)

// NewRun describes a file to import.
type NewRun struct {
	OrgID    uuid.UUID
	Kind     string
	FileName string
	// Body, when set, is the uploaded file, streamed into the bucket under
	// UploadKey (at most MaxUpload bytes). The CLI leaves it nil and sets
	// Size: it reads its file in place.
	Body io.Reader
	Size int64
}

// Start records a queued run and audits it ("import.start"). An upload
// (Body set) is first kept whole in the bucket, and its import job is
// queued in the transaction that records the run, so the two exist
// together; a file read in place (the CLI's) is worked by the caller
// through Run.
func (s *Service) Start(ctx context.Context, actor audit.Actor, in NewRun) (db.ImportRun, error) {
	v := &errs.Invalid{}
	if !slices.Contains(Kinds, in.Kind) {
		v.Add("kind", "must be one of %s", strings.Join(Kinds, ", "))
	}
	in.FileName = cleanName(in.FileName)
	if in.FileName == "" {
		v.Add("file", "choose a file to import")
	}
	if v.Has() {
		return db.ImportRun{}, v
	}
	id, err := uuid.NewV7()
	if err != nil {
		return db.ImportRun{}, err
	}
	key := UploadKey(in.OrgID, id)
	if in.Body != nil {
		if in.Size, err = s.keep(ctx, key, in.Body); err != nil {
			return db.ImportRun{}, err
		}
	}
	if in.Size == 0 {
		return db.ImportRun{}, errs.InvalidField("file", "%s is empty", in.FileName)
	}
	var run db.ImportRun
	err = db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		var createdBy uuid.NullUUID
		if actor.Kind == "user" {
			createdBy = uuid.NullUUID{UUID: actor.ID, Valid: true}
		}
		var err error
		run, err = q.ImportRunInsert(ctx, db.ImportRunInsertParams{
			ID: id, OrgID: in.OrgID, Kind: in.Kind, FileName: in.FileName, FileSize: in.Size,
			CreatedBy: createdBy, CreatedByLabel: actor.Label,
		})
		if err != nil {
			return err
		}
		if err := audit.Record(ctx, q, actor, audit.Entry{OrgID: in.OrgID, Action: "import.start", TargetType: "import_run",
			TargetID: id.String(), Details: map[string]any{"kind": in.Kind, "file_name": in.FileName, "file_size": in.Size}}); err != nil {
			return err
		}
		if in.Body == nil {
			return nil
		}
		_, err = s.Jobs.InsertTx(ctx, tx, ImportArgs{OrgID: run.OrgID, RunID: run.ID}, nil)
		return err
	})
	if err != nil {
		if in.Body != nil {
			s.discard(ctx, key)
		}
		return db.ImportRun{}, err
	}
	return run, nil
}

// cleanName keeps the base name of an uploaded file, printable and short.
func cleanName(name string) string {
	name = filepath.Base(strings.ReplaceAll(strings.TrimSpace(name), "\\", "/"))
	if name == "." || name == "/" {
		return ""
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(name, ""))
	for len(name) > 255 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// Progress is how far a run has read its file in the current phase.
type Progress struct {
	Phase string
	Done  int64 // bytes read in this phase
	Total int64 // the file's size
}

// RunUpload works a queued run on its uploaded file (see Run), streaming
// it from the bucket once for each pass. final says that no attempt
// follows this one. The upload is deleted once the run has ended: it
// succeeded, or failed in a way a retry would not change (bad input, a run
// that is gone), or failed on the final attempt.
func (s *Service) RunUpload(ctx context.Context, orgID, runID uuid.UUID, final bool) (Summary, error) {
	key := UploadKey(orgID, runID)
	sum, err := s.run(ctx, orgID, runID, s.openUpload(key), nil, final)
	if err == nil || final || IsBadInput(err) || errors.Is(err, errs.ErrNotFound) {
		s.discard(ctx, key)
	}
	return sum, err
}

// opener opens a run's file afresh, for one pass.
type opener func(ctx context.Context) (io.ReadCloser, error)

// Run imports the run's file at path, once (the CLI's import): it reads
// the whole file once to check every record, and only when all are good
// reads it again and stores the records (feedback items or pairs, by the
// run's kind) in batches inside one transaction, so a bad or cut-off file
// stores nothing and a crash halfway leaves nothing behind for a retry.
// Progress is written to the run's row as it goes and passed to progress
// (may be nil). The outcome (counts, or the error with its line) is
// recorded on the row; errors from the input match IsBadInput.
func (s *Service) Run(ctx context.Context, orgID, runID uuid.UUID, path string, progress func(Progress)) (Summary, error) {
	open := func(context.Context) (io.ReadCloser, error) { return os.Open(path) }
	return s.run(ctx, orgID, runID, open, progress, true)
}

// run is Run on the file that open opens; final says that no attempt
// follows this one, so a failure's message does not promise one.
func (s *Service) run(ctx context.Context, orgID, runID uuid.UUID, open opener, progress func(Progress), final bool) (Summary, error) {
	run, err := s.GetRun(ctx, orgID, runID)
	if err != nil {
		return Summary{}, err
	}
	if err := s.Q.ImportRunUpdateStarted(ctx, db.ImportRunUpdateStartedParams{OrgID: orgID, ID: runID}); err != nil {
		return Summary{}, err
	}
	rep := &reporter{s: s, run: run, progress: progress}
	sum, err := s.importFile(ctx, run, open, rep)
	// Record the outcome even when ctx was cancelled (a shutdown).
	fctx := context.WithoutCancel(ctx)
	if ferr := s.finish(fctx, run, sum, err, final); ferr != nil {
		return sum, errors.Join(err, ferr)
	}
	return sum, err
}

func (s *Service) finish(ctx context.Context, run db.ImportRun, sum Summary, runErr error, final bool) error {
	reasons, err := json.Marshal(nonNilMap(sum.Reasons))
	if err != nil {
		return err
	}
	p := db.ImportRunUpdateFinishedParams{OrgID: run.OrgID, ID: run.ID, Status: StatusSucceeded, SkipReasons: reasons,
		Stored: int32(sum.Stored), Duplicates: int32(sum.Duplicates), Skipped: int32(sum.Skipped)}
	if runErr != nil {
		// Nothing was stored: the counts of a partial read would mislead.
		p.Status, p.Stored, p.Duplicates, p.Skipped, p.SkipReasons = StatusFailed, 0, 0, 0, []byte("{}")
		p.Error = runErr.Error()
		if !IsBadInput(runErr) && !final {
			p.Error += " (the import is tried again)"
		}
		var le *importfile.LineError
		if errors.As(runErr, &le) {
			p.ErrorLine = pgtype.Int4{Int32: int32(le.Line), Valid: true}
		}
	}
	return s.Q.ImportRunUpdateFinished(ctx, p)
}

// IsBadInput reports whether an import failed because of its input (a bad
// line, a wrong or empty file), which trying again would not change.
func IsBadInput(err error) bool {
	var le *importfile.LineError
	var inv *errs.Invalid
	return errors.As(err, &le) || errors.As(err, &inv) || errors.Is(err, importfile.ErrEmpty) ||
		errors.Is(err, importfile.ErrLFSPointer) || errors.Is(err, importfile.ErrGzip) || errors.Is(err, os.ErrNotExist)
}

// reporter passes progress to the caller and, at most every progressEvery,
// to the run's row.
type reporter struct {
	s        *Service
	run      db.ImportRun
	progress func(Progress)
	last     time.Time
}

func (r *reporter) report(ctx context.Context, phase string, done int64) {
	if r.progress != nil {
		r.progress(Progress{Phase: phase, Done: done, Total: r.run.FileSize})
	}
	if time.Since(r.last) < progressEvery && done < r.run.FileSize {
		return
	}
	r.last = time.Now()
	// Progress goes through the pool, outside the storing transaction, so
	// the page sees it while the transaction is open.
	err := r.s.Q.ImportRunUpdateProgress(ctx, db.ImportRunUpdateProgressParams{OrgID: r.run.OrgID, ID: r.run.ID, Phase: phase, BytesDone: done})
	if err != nil && ctx.Err() == nil {
		r.s.Log.Warn("recording import progress", "run", r.run.ID, "err", err)
	}
}

// importFile checks, then stores, the file that open opens, as its kind
// says.
func (s *Service) importFile(ctx context.Context, run db.ImportRun, open opener, rep *reporter) (Summary, error) {
	switch {
	case slices.Contains(FeedbackKinds, run.Kind):
		return checkThenStore(ctx, s, run, open, rep, s.feedbackReader(run), s.storeFeedback)
	case IsPairKind(run.Kind):
		return checkThenStore(ctx, s, run, open, rep, readPairs, s.pairStore())
	}
	return Summary{}, fmt.Errorf("unknown import kind %q", run.Kind)
}

// checkThenStore is the one pipeline of every file: read reads the file as
// kind, counting skipped records in sum and passing each good one to its
// callback, or fails at the first bad one; store stores a batch in the
// run's transaction, counting it in sum. The file is read whole to check
// it, and only then read again to store it.
func checkThenStore[T any](ctx context.Context, s *Service, run db.ImportRun, open opener, rep *reporter,
	read func(ctx context.Context, kind string, r io.Reader, sum *Summary, fn func(T) error) error,
	store func(ctx context.Context, tx pgx.Tx, run db.ImportRun, batch []T, sum *Summary) error,
) (Summary, error) {
	err := readFile(ctx, run, open, PhaseChecking, rep, func(r io.Reader) error {
		return read(ctx, run.Kind, r, &Summary{}, func(T) error { return nil })
	})
	if err != nil {
		return Summary{}, err
	}
	var sum Summary
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		batch := make([]T, 0, batchSize)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			err := store(ctx, tx, run, batch, &sum)
			batch = batch[:0]
			return err
		}
		err := readFile(ctx, run, open, PhaseStoring, rep, func(r io.Reader) error {
			return read(ctx, run.Kind, r, &sum, func(v T) error {
				batch = append(batch, v)
				if len(batch) == batchSize {
					return flush()
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		return flush()
	})
	return sum, err
}

// readFile opens the file and passes it to read, reporting the bytes read
// in this phase.
func readFile(ctx context.Context, run db.ImportRun, open opener, phase string, rep *reporter, read func(io.Reader) error) error {
	f, err := open(ctx)
	if err != nil {
		return err
	}
	defer f.Close()
	rep.report(ctx, phase, 0)
	return read(importfile.WithProgress(f, run.FileSize, func(n, _ int64) { rep.report(ctx, phase, n) }))
}

func nonNilMap(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

// Runs lists the organisation's most recent import runs, newest first.
func (s *Service) Runs(ctx context.Context, orgID uuid.UUID, limit int) ([]db.ImportRun, error) {
	return s.Q.ImportRunList(ctx, db.ImportRunListParams{OrgID: orgID, RowLimit: int32(limit)})
}

// GetRun returns one run, or errs.ErrNotFound.
func (s *Service) GetRun(ctx context.Context, orgID, runID uuid.UUID) (db.ImportRun, error) {
	r, err := s.Q.ImportRunGet(ctx, db.ImportRunGetParams{OrgID: orgID, ID: runID})
	return r, errs.NotFound(err)
}
