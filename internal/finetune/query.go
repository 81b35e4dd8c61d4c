package finetune

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/models"
)

// Detail is one job with its log, metrics and checkpoints.
type Detail struct {
	Job db.FineTuningJob
	// DatasetID is the dataset of the job's version, for a link to it;
	// uuid.Nil when the version can no longer be read.
	DatasetID   uuid.UUID
	Events      []db.FineTuningEvent // newest first
	Metrics     []db.FineTuningMetric
	Checkpoints []db.FineTuningCheckpoint
	// Registered is the model version a succeeded job registered; nil
	// until then.
	Registered *models.Version
}

// maxEvents is how many of the newest events a job page shows.
const maxEvents = 200

// Get returns a job of the organisation, or errs.ErrNotFound.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Detail, error) {
	q := db.New(s.Pool)
	j, err := q.FineTuneJobGet(ctx, db.FineTuneJobGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Detail{}, errs.NotFound(err)
	}
	d := Detail{Job: j}
	if src, err := s.source(); err == nil {
		if v, err := src.Version(ctx, orgID, j.DatasetVersionID); err == nil {
			d.DatasetID = v.DatasetID
		} else if !errors.Is(err, errs.ErrNotFound) {
			return d, err
		}
	}
	if d.Events, err = q.FineTuneEventList(ctx, db.FineTuneEventListParams{OrgID: orgID, JobID: id, RowLimit: maxEvents}); err != nil {
		return d, err
	}
	if d.Metrics, err = q.FineTuneMetricList(ctx, db.FineTuneMetricListParams{OrgID: orgID, JobID: id}); err != nil {
		return d, err
	}
	if d.Checkpoints, err = q.FineTuneCheckpointList(ctx, db.FineTuneCheckpointListParams{OrgID: orgID, JobID: id}); err != nil {
		return d, err
	}
	if j.Status == db.FinetuneStatusSucceeded && s.Registry != nil {
		v, ok, err := s.Registry.ByJob(ctx, orgID, id)
		if err != nil {
			return d, err
		}
		if ok {
			d.Registered = &v
		}
	}
	return d, nil
}

// Filter narrows the job list; empty fields do not filter.
type Filter struct {
	Status    string
	Provider  string
	BaseModel string
	DatasetID uuid.UUID // jobs trained on a version of this dataset
}

// Statuses are the job states a filter may name.
var Statuses = []string{"pending", "uploading", "validating", "queued", "running", "succeeded", "failed", "cancelled"}

// FilterParams are the query parameters ParseFilter reads.
var FilterParams = []string{"status", "provider", "base_model", "dataset_id"}

// ParseFilter reads a filter from query parameters, checking each against
// the known values.
func ParseFilter(q url.Values, providers Providers) (Filter, error) {
	f := Filter{Status: q.Get("status"), Provider: q.Get("provider"), BaseModel: q.Get("base_model")}
	v := &errs.Invalid{}
	if f.Status != "" && !contains(Statuses, f.Status) {
		v.Add("status", "must be one of %s", strings.Join(Statuses, ", "))
	}
	if _, ok := providers[f.Provider]; f.Provider != "" && !ok {
		v.Add("provider", "must be one of %s", strings.Join(providers.Names(), ", "))
	}
	if s := q.Get("dataset_id"); s != "" {
		id, err := uuid.Parse(s)
		if err != nil {
			v.Add("dataset_id", "is not a dataset id")
		}
		f.DatasetID = id
	}
	return f, v.Err()
}

// Values writes the filter back as query parameters (only what is set).
func (f Filter) Values() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "provider": f.Provider, "base_model": f.BaseModel} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.DatasetID != uuid.Nil {
		q.Set("dataset_id", f.DatasetID.String())
	}
	return q
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ListName is the name the job list's keyset cursors carry: a cursor
// from another list is refused.
const ListName = "fine-tuning-jobs"

// Page is one page of jobs, newest first.
type Page struct {
	Jobs []db.FineTuningJob
	Next *keyset.Cursor // nil on the last page
}

// List returns a page of the organisation's jobs.
func (s *Service) List(ctx context.Context, orgID uuid.UUID, f Filter, after *keyset.Cursor, limit int) (Page, error) {
	p := db.FineTuneJobListParams{OrgID: orgID, Status: f.Status, Provider: f.Provider, BaseModel: f.BaseModel,
		DatasetID: uuid.NullUUID{UUID: f.DatasetID, Valid: f.DatasetID != uuid.Nil}, RowLimit: int32(limit + 1)}
	if after != nil {
		p.BeforeAt, p.BeforeID = &after.At, after.ID
	}
	rows, err := db.New(s.Pool).FineTuneJobList(ctx, p)
	if err != nil {
		return Page{}, err
	}
	var page Page
	page.Jobs, page.Next = keyset.Page(rows, limit, func(j db.FineTuningJob) keyset.Cursor { return keyset.Cursor{At: j.CreatedAt, ID: j.ID} })
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
