package importer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/importfile"
)

// File kinds.
const (
	KindJSONL = "jsonl" // one feedback item per line, the API's item shape
	KindOASST = "oasst" // OpenAssistant message trees, one tree per line
)

// Kinds lists the file kinds, for forms and flags.
var Kinds = []string{KindJSONL, KindOASST}

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
	// batchSize is how many items go to the database in one COPY.
	batchSize = 1000
	// progressEvery bounds how often progress is written to the run's row.
	progressEvery = 250 * time.Millisecond
)

// NewRun describes a file to import.
type NewRun struct {
	OrgID    uuid.UUID
	Kind     string
	FileName string
	// Body, when set, is the uploaded file, copied to UploadPath (at most
	// MaxUpload bytes). The CLI leaves it nil and sets Size: it reads its
	// file in place.
	Body io.Reader
	Size int64
}

// Enqueue is called inside the transaction that records a run, so the run
// and the job that will work it commit together.
type Enqueue func(ctx context.Context, tx pgx.Tx, run db.ImportRun) error

// Start records a queued run and audits it ("import.start"); with a Body it
// first keeps the file under the data directory.
func (s *Service) Start(ctx context.Context, actor audit.Actor, in NewRun, enqueue Enqueue) (db.ImportRun, error) {
	v := &errs.Invalid{}
	if in.Kind != KindJSONL && in.Kind != KindOASST {
		v.Add("kind", "must be %s", strings.Join(Kinds, " or "))
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
	if in.Body != nil {
		if in.Size, err = s.keep(id, in.Body); err != nil {
			return db.ImportRun{}, err
		}
	}
	if in.Size == 0 {
		s.discard(id)
		return db.ImportRun{}, errs.InvalidField("file", "%s is empty", in.FileName)
	}
	var run db.ImportRun
	err = db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		var createdBy uuid.NullUUID
		if actor.Kind == "user" {
			createdBy = uuid.NullUUID{UUID: actor.ID, Valid: true}
		}
		var err error
		run, err = q.ImportRunCreate(ctx, db.ImportRunCreateParams{
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
		if enqueue != nil {
			return enqueue(ctx, tx, run)
		}
		return nil
	})
	if err != nil {
		if in.Body != nil {
			s.discard(id)
		}
		return db.ImportRun{}, err
	}
	return run, nil
}

// keep copies an upload to UploadPath(id) and returns its size.
func (s *Service) keep(id uuid.UUID, body io.Reader) (int64, error) {
	path := s.UploadPath(id)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, io.LimitReader(body, MaxUpload+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > MaxUpload {
		err = errs.InvalidField("file", "is larger than %d MiB", MaxUpload>>20)
	}
	if err != nil {
		s.discard(id)
		return 0, err
	}
	return n, nil
}

func (s *Service) discard(id uuid.UUID) {
	if err := os.Remove(s.UploadPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.Log.Warn("removing an import file", "run", id, "err", err)
	}
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

// RunUpload works a queued run on its uploaded file (see Run) and removes
// the file once the run has an outcome that a retry would not change.
func (s *Service) RunUpload(ctx context.Context, orgID, runID uuid.UUID) (Summary, error) {
	sum, err := s.Run(ctx, orgID, runID, s.UploadPath(runID), nil)
	if err == nil || IsBadInput(err) {
		s.discard(runID)
	}
	return sum, err
}

// Run imports the run's file at path: it reads the whole file once to check
// every record, and only when all are good reads it again and stores the
// items in batches inside one transaction, so a bad or cut-off file stores
// nothing and a crash halfway leaves nothing behind for the retry. Progress
// is written to the run's row as it goes and passed to progress (may be
// nil). The outcome (counts, or the error with its line) is recorded on the
// row; errors from the input match IsBadInput.
func (s *Service) Run(ctx context.Context, orgID, runID uuid.UUID, path string, progress func(Progress)) (Summary, error) {
	run, err := s.GetRun(ctx, orgID, runID)
	if err != nil {
		return Summary{}, err
	}
	if err := s.Q.ImportRunStart(ctx, db.ImportRunStartParams{OrgID: orgID, ID: runID}); err != nil {
		return Summary{}, err
	}
	rep := &reporter{s: s, run: run, progress: progress}
	sum, err := s.importFile(ctx, run, path, rep)
	// Record the outcome even when ctx was cancelled (a shutdown).
	fctx := context.WithoutCancel(ctx)
	if ferr := s.finish(fctx, run, sum, err); ferr != nil {
		return sum, errors.Join(err, ferr)
	}
	return sum, err
}

func (s *Service) finish(ctx context.Context, run db.ImportRun, sum Summary, runErr error) error {
	reasons, err := json.Marshal(nonNilMap(sum.Reasons))
	if err != nil {
		return err
	}
	p := db.ImportRunFinishParams{OrgID: run.OrgID, ID: run.ID, Status: StatusSucceeded, SkipReasons: reasons,
		Stored: int32(sum.Stored), Duplicates: int32(sum.Duplicates), Skipped: int32(sum.Skipped)}
	if runErr != nil {
		// Nothing was stored: the counts of a partial read would mislead.
		p.Status, p.Stored, p.Duplicates, p.Skipped, p.SkipReasons = StatusFailed, 0, 0, 0, []byte("{}")
		p.Error = runErr.Error()
		if !IsBadInput(runErr) {
			p.Error += " (the import is tried again)"
		}
		var le *importfile.LineError
		if errors.As(runErr, &le) {
			p.ErrorLine = pgtype.Int4{Int32: int32(le.Line), Valid: true}
		}
	}
	return s.Q.ImportRunFinish(ctx, p)
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
	err := r.s.Q.ImportRunProgress(ctx, db.ImportRunProgressParams{OrgID: r.run.OrgID, ID: r.run.ID, Phase: phase, BytesDone: done})
	if err != nil && ctx.Err() == nil {
		r.s.Log.Warn("recording import progress", "run", r.run.ID, "err", err)
	}
}

// importFile checks, then stores, the file at path.
func (s *Service) importFile(ctx context.Context, run db.ImportRun, path string, rep *reporter) (Summary, error) {
	var checked Summary
	err := s.readFile(ctx, run, path, PhaseChecking, rep, &checked, func(int, feedback.Item) error { return nil })
	if err != nil {
		return Summary{}, err
	}
	var sum Summary
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		sum = Summary{}
		batch := make([]feedback.Item, 0, batchSize)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			res, err := s.Feedback.IngestBatchTx(ctx, tx, run.OrgID, "file", batch)
			if err != nil {
				return err
			}
			sum.Stored += res.Inserted
			sum.Duplicates += res.Duplicates
			batch = batch[:0]
			return nil
		}
		err := s.readFile(ctx, run, path, PhaseStoring, rep, &sum, func(_ int, it feedback.Item) error {
			batch = append(batch, it)
			if len(batch) == batchSize {
				return flush()
			}
			return nil
		})
		if err != nil {
			return err
		}
		return flush()
	})
	return sum, err
}

// readFile reads the file at path as run.Kind, maps and validates every
// record, counts skipped ones in sum and passes each item to fn.
func (s *Service) readFile(ctx context.Context, run db.ImportRun, path, phase string, rep *reporter, sum *Summary, fn func(line int, it feedback.Item) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rep.report(ctx, phase, 0)
	r := importfile.WithProgress(f, run.FileSize, func(read, _ int64) { rep.report(ctx, phase, read) })
	switch run.Kind {
	case KindJSONL:
		return readJSONL(ctx, r, fn)
	case KindOASST:
		return readOASST(ctx, r, sum, fn)
	}
	return fmt.Errorf("unknown import kind %q", run.Kind)
}

// readJSONL reads feedback items in the API's shape. An item without an
// external_id gets "jsonl:" and a digest of its content, so importing the
// same file again is recognised and stores nothing new.
func readJSONL(ctx context.Context, r io.Reader, fn func(int, feedback.Item) error) error {
	return importfile.ReadJSONL(ctx, r, func(line int, it feedback.Item) error {
		v := &errs.Invalid{}
		it.Validate(v, "")
		if v.Has() {
			return v
		}
		if it.ExternalID == "" {
			b, err := json.Marshal(it)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			it.ExternalID = "jsonl:" + hex.EncodeToString(sum[:16])
		}
		return fn(line, it)
	})
}

// readOASST turns every assistant reply of the trees into a feedback item.
func readOASST(ctx context.Context, r io.Reader, sum *Summary, fn func(int, feedback.Item) error) error {
	rep, err := importfile.ReadOASST(ctx, r, func(tree importfile.OASSTTree) error {
		for _, o := range tree.Items {
			it, err := oasstItem(o)
			if err != nil {
				return err
			}
			v := &errs.Invalid{}
			it.Validate(v, "message "+o.MessageID+": ")
			if v.Has() {
				return v
			}
			if err := fn(tree.Line, it); err != nil {
				return err
			}
		}
		return nil
	})
	for _, sk := range rep.Skipped {
		sum.skip(skipReason(sk.Reason))
	}
	return err
}

// skipReason drops the message or tree id the reader puts before the
// reason ("message 1f…: deleted (with its replies)"), so reasons add up.
func skipReason(reason string) string {
	if _, rest, ok := strings.Cut(reason, ": "); ok && (strings.HasPrefix(reason, "message ") || strings.HasPrefix(reason, "tree ")) {
		return rest
	}
	return reason
}

// oasstItem maps one OASST assistant reply: the question is the prompt's
// last (user) turn, the earlier turns go to context.messages; the votes
// give the thumbs (a reply without a majority either way is "detailed":
// its rank is the judgement); the rank is kept with the parent message's id
// as the group, for turning ranks into pairs.
func oasstItem(o importfile.OASSTItem) (feedback.Item, error) {
	if len(o.Prompt) == 0 {
		return feedback.Item{}, fmt.Errorf("message %s: no prompt", o.MessageID)
	}
	last := o.Prompt[len(o.Prompt)-1]
	it := feedback.Item{
		ExternalID: o.ExternalID,
		SessionID:  o.TreeID,
		Query:      last.Content,
		Response:   o.Response,
		Model:      o.ModelName,
		Rank:       o.Rank,
		RankGroup:  o.ParentID,
		Tags:       []string{"oasst"},
	}
	switch o.Thumbs {
	case importfile.ThumbsUp:
		it.FeedbackType = "thumbs_up"
	case importfile.ThumbsDown:
		it.FeedbackType = "thumbs_down"
	default:
		it.FeedbackType = "detailed"
	}
	if o.Up+o.Down > 0 {
		it.Comment = fmt.Sprintf("OpenAssistant votes: %d up, %d down", o.Up, o.Down)
	}
	if o.Synthetic {
		it.Tags = append(it.Tags, "synthetic")
	}
	if len(o.Prompt) > 1 {
		b, err := json.Marshal(map[string]any{"messages": o.Prompt[:len(o.Prompt)-1]})
		if err != nil {
			return feedback.Item{}, err
		}
		it.Context = b
	}
	return it, nil
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
	if errors.Is(err, pgx.ErrNoRows) {
		return r, errs.ErrNotFound
	}
	return r, err
}
