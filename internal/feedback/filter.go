package feedback

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyset"
)

// Filter is the queue's filter, the same for the page, the API and bulk
// actions. It round-trips through URL query parameters so a filtered queue
// can be shared as a link.
type Filter struct {
	Status         string // one of Statuses, or "" for any
	Type           string
	Source         string
	RatingMin      int // 0: no bound
	RatingMax      int
	DimBelow       int // some dimension rated below this; 0: off
	Tag            string
	Model          string
	Assignee       uuid.UUID // uuid.Nil: anyone
	From, To       time.Time // zero: open; to the second (since, until) or whole days (from, to)
	WithDuplicates bool
	PIIOnly        bool
	Q              string    // full-text search over query, response, comment
	DatasetID      uuid.UUID // members of this training dataset; uuid.Nil: any
	// Safety keeps safety reports: a safety score of 2 or less or the tag
	// "safety", as the safety alert counts them.
	Safety bool
}

// FilterParams are the query parameters ParseFilter reads.
var FilterParams = []string{"status", "type", "source", "rating_min", "rating_max", "dim_below", "tag", "model",
	"assignee", "from", "to", "since", "until", "duplicates", "pii", "q", "dataset_id", "safety"}

// ParseFilter reads a filter from query parameters, with a message per bad one.
func ParseFilter(q url.Values) (Filter, error) {
	v := &errs.Invalid{}
	f := Filter{
		Status: q.Get("status"), Type: q.Get("type"), Source: q.Get("source"),
		Tag: strings.ToLower(strings.TrimSpace(q.Get("tag"))), Model: strings.TrimSpace(q.Get("model")),
		WithDuplicates: q.Get("duplicates") == "show", PIIOnly: q.Get("pii") == "1",
		Q: strings.TrimSpace(q.Get("q")), Safety: q.Get("safety") == "1",
	}
	if f.Status != "" && !oneOf(f.Status, Statuses) {
		v.Add("status", "must be one of %s", strings.Join(Statuses, ", "))
	}
	if f.Type != "" && !oneOf(f.Type, Types) {
		v.Add("type", "must be one of %s", strings.Join(Types, ", "))
	}
	if f.Source != "" && !oneOf(f.Source, Sources) {
		v.Add("source", "must be one of %s", strings.Join(Sources, ", "))
	}
	f.RatingMin = intParam(v, q, "rating_min", 1, 5)
	f.RatingMax = intParam(v, q, "rating_max", 1, 5)
	f.DimBelow = intParam(v, q, "dim_below", 2, 6)
	if a := q.Get("assignee"); a != "" {
		id, err := uuid.Parse(a)
		if err != nil {
			v.Add("assignee", "is not a user id")
		}
		f.Assignee = id
	}
	if d := q.Get("dataset_id"); d != "" {
		id, err := uuid.Parse(d)
		if err != nil {
			v.Add("dataset_id", "is not a dataset id")
		}
		f.DatasetID = id
	}
	// An alert's link bounds the window to the second (since, until); a
	// date the user picks in the form (from, to) replaces it.
	f.From = timeParam(v, q, "since")
	f.To = timeParam(v, q, "until")
	if q.Get("from") != "" {
		f.From = dateParam(v, q, "from", false)
	}
	if q.Get("to") != "" {
		f.To = dateParam(v, q, "to", true)
	}
	if len(f.Q) > 500 {
		v.Add("q", "at most 500 characters")
	}
	if len(f.Tag) > MaxTagLen || len(f.Model) > MaxShortField {
		v.Add("tag", "too long")
	}
	return f, v.Err()
}

// Values writes the filter back as query parameters (only what is set).
func (f Filter) Values() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("status", f.Status)
	set("type", f.Type)
	set("source", f.Source)
	if f.RatingMin > 0 {
		set("rating_min", strconv.Itoa(f.RatingMin))
	}
	if f.RatingMax > 0 {
		set("rating_max", strconv.Itoa(f.RatingMax))
	}
	if f.DimBelow > 0 {
		set("dim_below", strconv.Itoa(f.DimBelow))
	}
	set("tag", f.Tag)
	set("model", f.Model)
	if f.Assignee != uuid.Nil {
		set("assignee", f.Assignee.String())
	}
	// A bound on a day's start is a date; any other is a time to the second.
	if !f.From.IsZero() {
		if wholeDay(f.From) {
			set("from", f.From.Format(time.DateOnly))
		} else {
			set("since", f.From.UTC().Format(time.RFC3339Nano))
		}
	}
	if !f.To.IsZero() {
		if wholeDay(f.To) {
			set("to", f.To.AddDate(0, 0, -1).Format(time.DateOnly))
		} else {
			set("until", f.To.UTC().Format(time.RFC3339Nano))
		}
	}
	if f.WithDuplicates {
		set("duplicates", "show")
	}
	if f.PIIOnly {
		set("pii", "1")
	}
	set("q", f.Q)
	if f.DatasetID != uuid.Nil {
		set("dataset_id", f.DatasetID.String())
	}
	if f.Safety {
		set("safety", "1")
	}
	return q
}

func wholeDay(t time.Time) bool {
	return t.UTC().Equal(t.UTC().Truncate(24 * time.Hour))
}

// timeParam reads an RFC 3339 time (2026-01-31T09:30:00Z).
func timeParam(v *errs.Invalid, q url.Values, name string) time.Time {
	s := q.Get(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		v.Add(name, "must be a time like 2026-01-31T09:30:00Z")
		return time.Time{}
	}
	return t.UTC()
}

func intParam(v *errs.Invalid, q url.Values, name string, min, max int) int {
	s := q.Get(name)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > max {
		v.Add(name, "must be a whole number from %d to %d", min, max)
		return 0
	}
	return n
}

// dateParam reads YYYY-MM-DD; an end date includes its whole day.
func dateParam(v *errs.Invalid, q url.Values, name string, end bool) time.Time {
	s := q.Get(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		v.Add(name, "must be a date like 2026-01-31")
		return time.Time{}
	}
	if end {
		t = t.AddDate(0, 0, 1)
	}
	return t
}

// ListName is the name the queue's keyset cursors carry: a cursor from
// another list is refused.
const ListName = "feedback"

// ListParams turns the filter into the list query's parameters.
func (f Filter) ListParams(orgID uuid.UUID, cursor *keyset.Cursor, limit int) db.FeedbackListParams {
	p := db.FeedbackListParams{
		OrgID: orgID, Status: nullStatus(f.Status), FeedbackType: nullType(f.Type), Source: nullSource(f.Source),
		RatingMin: int32(f.RatingMin), RatingMax: int32(f.RatingMax), DimBelow: int32(f.DimBelow), Tag: f.Tag, Model: f.Model,
		AssigneeID: nullID(f.Assignee), CreatedFrom: optTime(f.From), CreatedTo: optTime(f.To),
		WithDuplicates: f.WithDuplicates, PiiOnly: f.PIIOnly, Q: f.Q, DatasetID: nullID(f.DatasetID), SafetyOnly: f.Safety,
		RowLimit: int32(limit),
	}
	p.CursorTime, p.CursorID = cursor.Bounds()
	return p
}

// CountParams are the status-count query's parameters (status left out:
// the counts are per status).
func (f Filter) CountParams(orgID uuid.UUID) db.FeedbackCountByStatusParams {
	p := f.ListParams(orgID, nil, 0)
	return db.FeedbackCountByStatusParams{
		OrgID: orgID, FeedbackType: p.FeedbackType, Source: p.Source, RatingMin: p.RatingMin, RatingMax: p.RatingMax,
		DimBelow: p.DimBelow, Tag: p.Tag, Model: p.Model, AssigneeID: p.AssigneeID, CreatedFrom: p.CreatedFrom,
		CreatedTo: p.CreatedTo, WithDuplicates: p.WithDuplicates, PiiOnly: p.PiiOnly, Q: p.Q, DatasetID: p.DatasetID,
		SafetyOnly: p.SafetyOnly,
	}
}

// MatchingParams select every matching id, up to limit.
func (f Filter) MatchingParams(orgID uuid.UUID, limit int) db.FeedbackListMatchingIDsParams {
	p := f.ListParams(orgID, nil, limit)
	return db.FeedbackListMatchingIDsParams{
		OrgID: orgID, Status: p.Status, FeedbackType: p.FeedbackType, Source: p.Source, RatingMin: p.RatingMin,
		RatingMax: p.RatingMax, DimBelow: p.DimBelow, Tag: p.Tag, Model: p.Model, AssigneeID: p.AssigneeID,
		CreatedFrom: p.CreatedFrom, CreatedTo: p.CreatedTo, WithDuplicates: p.WithDuplicates, PiiOnly: p.PiiOnly,
		Q: p.Q, DatasetID: p.DatasetID, SafetyOnly: p.SafetyOnly, RowLimit: int32(limit),
	}
}

func nullStatus(s string) db.NullReviewStatus {
	return db.NullReviewStatus{ReviewStatus: db.ReviewStatus(s), Valid: s != ""}
}

func nullType(s string) db.NullFeedbackType {
	return db.NullFeedbackType{FeedbackType: db.FeedbackType(s), Valid: s != ""}
}

func nullSource(s string) db.NullFeedbackSource {
	return db.NullFeedbackSource{FeedbackSource: db.FeedbackSource(s), Valid: s != ""}
}

func nullID(id uuid.UUID) uuid.NullUUID { return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil} }

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
