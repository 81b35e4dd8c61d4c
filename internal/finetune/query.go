package finetune

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// Detail is one job with its log, metrics and checkpoints.
type Detail struct {
	Job         db.FineTuningJob
	Events      []db.FineTuningEvent // newest first
	Metrics     []db.FineTuningMetric
	Checkpoints []db.FineTuningCheckpoint
}

// maxEvents is how many of the newest events a job page shows.
const maxEvents = 200

// Get returns a job of the organisation, or errs.ErrNotFound.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Detail, error) {
	q := db.New(s.Pool)
	j, err := q.FineTuneJobGet(ctx, db.FineTuneJobGetParams{OrgID: orgID, ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return Detail{}, errs.ErrNotFound
	}
	if err != nil {
		return Detail{}, err
	}
	d := Detail{Job: j}
	if d.Events, err = q.FineTuneEvents(ctx, db.FineTuneEventsParams{OrgID: orgID, JobID: id, RowLimit: maxEvents}); err != nil {
		return d, err
	}
	if d.Metrics, err = q.FineTuneMetrics(ctx, db.FineTuneMetricsParams{OrgID: orgID, JobID: id}); err != nil {
		return d, err
	}
	d.Checkpoints, err = q.FineTuneCheckpoints(ctx, db.FineTuneCheckpointsParams{OrgID: orgID, JobID: id})
	return d, err
}

// Filter narrows the job list; empty fields do not filter.
type Filter struct {
	Status    string
	Provider  string
	BaseModel string
}

// Statuses are the job states a filter may name.
var Statuses = []string{"pending", "uploading", "validating", "queued", "running", "succeeded", "failed", "cancelled"}

// Check validates the filter against the known values.
func (f Filter) Check(providers Providers) error {
	v := &errs.Invalid{}
	if f.Status != "" && !contains(Statuses, f.Status) {
		v.Add("status", "must be one of %s", strings.Join(Statuses, ", "))
	}
	if _, ok := providers[f.Provider]; f.Provider != "" && !ok {
		v.Add("provider", "must be one of %s", strings.Join(providers.Names(), ", "))
	}
	return v.Err()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Cursor is the position after the last job of a page.
type Cursor struct {
	At time.Time
	ID uuid.UUID
}

// Encode writes the cursor for a URL.
func (c Cursor) Encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.At.UTC().Format(time.RFC3339Nano) + "|" + c.ID.String()))
}

// ParseCursor reads a cursor written by Encode; "" is the first page.
func ParseCursor(s string) (*Cursor, error) {
	if s == "" {
		return nil, nil
	}
	bad := errs.InvalidField("cursor", "is not a cursor from this list")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	at, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return nil, bad
	}
	c := &Cursor{}
	if c.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return nil, bad
	}
	if c.ID, err = uuid.Parse(id); err != nil {
		return nil, bad
	}
	return c, nil
}

// Page is one page of jobs, newest first.
type Page struct {
	Jobs []db.FineTuningJob
	Next *Cursor // nil on the last page
}

// List returns a page of the organisation's jobs.
func (s *Service) List(ctx context.Context, orgID uuid.UUID, f Filter, after *Cursor, limit int) (Page, error) {
	p := db.FineTuneJobListParams{OrgID: orgID, Status: f.Status, Provider: f.Provider, BaseModel: f.BaseModel, RowLimit: int32(limit + 1)}
	if after != nil {
		p.BeforeAt, p.BeforeID = &after.At, after.ID
	}
	rows, err := db.New(s.Pool).FineTuneJobList(ctx, p)
	if err != nil {
		return Page{}, err
	}
	page := Page{Jobs: rows}
	if len(rows) > limit {
		page.Jobs = rows[:limit]
		last := page.Jobs[limit-1]
		page.Next = &Cursor{At: last.CreatedAt, ID: last.ID}
	}
	return page, nil
}

// Progress is how far a job has gone, from 0 to 1, and whether that is
// known at all.
func Progress(j db.FineTuningJob) (float64, bool) {
	switch {
	case j.Status == db.FinetuneStatusSucceeded:
		return 1, true
	case j.TotalSteps > 0:
		return min(float64(j.Step)/float64(j.TotalSteps), 1), true
	case j.TotalEpochs > 0 && j.Epoch > 0:
		return min(float64(j.Epoch)/float64(j.TotalEpochs), 1), true
	}
	return 0, false
}
