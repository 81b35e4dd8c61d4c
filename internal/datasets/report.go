package datasets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/validate"
)

// ReportRequest chooses what a validation report checks.
type ReportRequest struct {
	Format  string // "" for the dataset's target format
	MaskPII bool   // check the examples as an export with this setting writes them
}

// Report is a validation report and what it was run on.
type Report struct {
	*validate.Report
	// Source says what was checked: a frozen version, or the members as
	// they are now (before the first freeze, or while curating again).
	Source  string
	Version *db.DatasetVersion
	// LeftOut counts the members left out of what was checked because
	// the dataset takes agreed items only.
	LeftOut LeftOut
}

// Report validates a dataset for a format: its current version when it is
// ready or exported, its members as they are now otherwise. Examples are
// checked as the export writes them: with PII masked when MaskPII is set,
// and otherwise with PII reported as warnings. Reading a report changes
// nothing; an export records the score it was checked with.
func (s *Service) Report(ctx context.Context, orgID, id uuid.UUID, req ReportRequest) (Report, error) {
	d, err := s.Get(ctx, orgID, id)
	if err != nil {
		return Report{}, err
	}
	format := req.Format
	if format == "" {
		format = d.Dataset.ExportFormat
	}
	f, err := export.ParseFormat(format)
	if err != nil {
		return Report{}, errs.InvalidField("format", "%v", err)
	}
	q := db.New(s.Pool)
	if d.Current != nil && (d.Dataset.Status == StatusReady || d.Dataset.Status == StatusExported) {
		out, err := validateVersion(ctx, s.Pool, *d.Current, f, d.Dataset.BaseModel, req.MaskPII)
		out.Source = fmt.Sprintf("version %d (frozen, %s)", d.Current.Number, short(d.Current.ContentHash))
		out.LeftOut = LeftOut{Disputed: int(d.Current.LeftOutDisputed), Open: int(d.Current.LeftOutOpen)}
		return out, err
	}
	c, err := newChecker(f, d.Dataset.BaseModel, KindOf(string(d.Dataset.DatasetType)), req.MaskPII)
	if err != nil {
		return Report{}, err
	}
	leftOut, err := memberFacts(ctx, q, d.Dataset, c)
	if err != nil {
		return Report{}, err
	}
	return Report{Report: c.v.Report(), Source: "the current members (not frozen yet)", LeftOut: leftOut}, nil
}

// computing admits one computation of a frozen version's report at a
// time in a process. Counting tokens keeps every core busy, so a second
// one at once would finish no sooner, and the caller that waits reads the
// report the first one stored, or at least its facts.
var computing = make(chan struct{}, 1)

// validateVersion is the report on a frozen version in a format: the
// stored one when there is one (a frozen version never changes), else
// computed over its items and stored for the next caller. A caller that
// waited while another computed the same report reads the stored one.
func validateVersion(ctx context.Context, pool *pgxpool.Pool, ver db.DatasetVersion, f export.Format, baseModel string, maskPII bool) (Report, error) {
	q := db.New(pool)
	key := db.DatasetVersionReportGetParams{VersionID: ver.ID, Format: string(f), MaskPii: maskPII, BaseModel: baseModel, Validator: validate.Revision}
	out := Report{Version: &ver, Source: fmt.Sprintf("version %d", ver.Number)}
	if found, err := storedReport(ctx, q, key, &out); found || err != nil {
		return out, err
	}
	err := whileComputing(ctx, func() error {
		if found, err := storedReport(ctx, q, key, &out); found || err != nil {
			return err
		}
		var err error
		if out.Report, err = computeVersionReport(ctx, pool, ver, f, baseModel, maskPII); err != nil {
			return err
		}
		raw, err := json.Marshal(out.Report)
		if err != nil {
			return err
		}
		return q.DatasetVersionReportInsert(ctx, db.DatasetVersionReportInsertParams{VersionID: ver.ID, Format: string(f), MaskPii: maskPII,
			BaseModel: baseModel, Validator: validate.Revision, Report: raw})
	})
	if err != nil {
		return Report{}, err
	}
	return out, nil
}

// whileComputing runs fn holding computing, or returns when ctx ends
// first.
func whileComputing(ctx context.Context, fn func() error) error {
	select {
	case computing <- struct{}{}:
		defer func() { <-computing }()
	case <-ctx.Done():
		return ctx.Err()
	}
	return fn()
}

// storedReport reads a stored report into out.Report, and says whether
// there was one.
func storedReport(ctx context.Context, q *db.Queries, key db.DatasetVersionReportGetParams, out *Report) (bool, error) {
	stored, err := q.DatasetVersionReportGet(ctx, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	out.Report = &validate.Report{}
	if err := json.Unmarshal(stored, out.Report); err != nil {
		return false, fmt.Errorf("stored report of version %s: %w", out.Version.ID, err)
	}
	return true, nil
}

// computeVersionReport validates every item of a frozen version.
func computeVersionReport(ctx context.Context, pool *pgxpool.Pool, ver db.DatasetVersion, f export.Format, baseModel string, maskPII bool) (*validate.Report, error) {
	c, err := newChecker(f, baseModel, ver.Kind, maskPII)
	if err != nil {
		return nil, err
	}
	if err := versionFacts(ctx, pool, ver, c); err != nil {
		return nil, err
	}
	return c.v.Report(), nil
}

// decodeBatch is how many items are decoded together, in parallel.
const decodeBatch = 256

// eachVersionItem calls fn with every item of one split of a version, in
// canonical order. The split is streamed from one query while batches of
// it are decoded (and passed through prepare, when set) on every core, and
// fn sees them one at a time, in order. Memory holds a few batches,
// whatever the version's size.
func eachVersionItem(ctx context.Context, q *db.Queries, versionID uuid.UUID, split string, prepare func(Example) Example, fn func(Example) error) error {
	examples := make([]Example, decodeBatch)
	read := func(ctx context.Context, emit func([]byte) error) error {
		return q.DatasetVersionItemEach(ctx, versionID, split, func(content []byte) error { return emit(bytes.Clone(content)) })
	}
	return inBatches(ctx, decodeBatch, read, func(batch [][]byte) error {
		if err := decodeAll(batch, examples[:len(batch)], prepare); err != nil {
			return err
		}
		for i := range batch {
			if err := fn(examples[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// inBatches runs read, which emits items one at a time, in one goroutine,
// while consume gets them in batches of size, in order, in another. Memory
// holds a few batches. emit's items must not be reused by read.
func inBatches[T any](ctx context.Context, size int, read func(ctx context.Context, emit func(T) error) error, consume func([]T) error) error {
	batches := make(chan []T, 2)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(batches)
		batch := make([]T, 0, size)
		send := func() error {
			select {
			case batches <- batch:
				batch = make([]T, 0, size)
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		err := read(gctx, func(item T) error {
			batch = append(batch, item)
			if len(batch) == size {
				return send()
			}
			return nil
		})
		if err == nil && len(batch) > 0 {
			err = send()
		}
		return err
	})
	g.Go(func() error {
		for batch := range batches {
			if err := consume(batch); err != nil {
				return err
			}
		}
		return nil
	})
	return g.Wait()
}

// decodeAll decodes raw contents into out, split over the cores.
func decodeAll(raw [][]byte, out []Example, prepare func(Example) Example) error {
	return onCores(len(raw), func(i int) error {
		out[i] = Example{}
		if err := decodeExample(raw[i], &out[i]); err != nil {
			return fmt.Errorf("version item: %w", err)
		}
		if prepare != nil {
			out[i] = prepare(out[i])
		}
		return nil
	})
}

// onCores calls fn for every index in [0, n), in contiguous chunks, one
// per core (at most four), and returns the first error.
func onCores(n int, fn func(i int) error) error {
	workers := min(runtime.GOMAXPROCS(0), 4)
	chunk := (n + workers - 1) / workers
	var g errgroup.Group
	for start := 0; start < n; start += chunk {
		end := min(start+chunk, n)
		g.Go(func() error {
			for i := start; i < end; i++ {
				if err := fn(i); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// ReportArgs asks a worker to compute a frozen version's report in its
// dataset's format, as an export writes it (PII masked), and store it.
type ReportArgs struct {
	VersionID uuid.UUID `json:"version_id"`
}

// Kind names the job in River's table.
func (ReportArgs) Kind() string { return "dataset_report" }

// StoreReport computes and stores a frozen version's report in its
// dataset's export format with PII masked, unless it is stored already.
func (s *Service) StoreReport(ctx context.Context, versionID uuid.UUID) error {
	q := db.New(s.Pool)
	ver, err := q.DatasetVersionGetByID(ctx, versionID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // the dataset was deleted since
	}
	if err != nil {
		return err
	}
	d, err := q.DatasetGet(ctx, db.DatasetGetParams{OrgID: ver.OrgID, ID: ver.DatasetID})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	f, err := export.ParseFormat(d.TrainingDataset.ExportFormat)
	if err != nil {
		return err
	}
	_, err = validateVersion(ctx, s.Pool, ver, f, d.TrainingDataset.BaseModel, true)
	return err
}
