// Package feedbackstats sums up an organisation's feedback over a window
// of whole UTC days: volume, thumbs and ratings per day and model,
// dimension averages, the rating distribution, review progress and what
// each curator did. It reads and counts; how the numbers are shown is the
// page's business.
package feedbackstats

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// The window: DefaultDays unless asked, at most MaxDays.
const (
	DefaultDays = 30
	MaxDays     = 365
	maxModel    = 256
)

// Statuses are the review statuses in the order of the review's progress.
var Statuses = []string{"pending", "approved", "rejected", "needs_correction", "corrected"}

// Window is what to sum up: the last Days whole UTC days, today included,
// of one model's feedback, or every model's when Model is "".
type Window struct {
	Days  int
	Model string
}

// ParseWindow reads a window as a URL gives it: days ("" is DefaultDays)
// and model.
func ParseWindow(days, model string) (Window, error) {
	w := Window{Days: DefaultDays, Model: model}
	if days != "" {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > MaxDays {
			return w, errs.InvalidField("days", "must be a whole number of days from 1 to %d", MaxDays)
		}
		w.Days = n
	}
	if len(model) > maxModel {
		return w, errs.InvalidField("model", "is at most %d bytes", maxModel)
	}
	return w, nil
}

// Counts are the feedback of a day, a model or the whole window.
type Counts struct {
	Total, ThumbsUp, ThumbsDown int
	Ratings, RatingSum          int
}

func (c *Counts) add(o Counts) {
	c.Total += o.Total
	c.ThumbsUp += o.ThumbsUp
	c.ThumbsDown += o.ThumbsDown
	c.Ratings += o.Ratings
	c.RatingSum += o.RatingSum
}

// Model is one model's feedback: in the window and on each of its days.
type Model struct {
	Name string // "" for feedback that named no model
	Counts
	Daily []Counts
}

// Dimension is one rated aspect: how many scores and their average.
type Dimension struct {
	Name    string
	Count   int
	Average float64
}

// Bucket is a labelled count: a rating or a review status.
type Bucket struct {
	Label string
	Count int
}

// Curator is one person's review actions in the window.
type Curator struct {
	Label                                  string
	Actions, Approved, Rejected, Corrected int
	Last                                   time.Time
}

// Report is a window's numbers.
type Report struct {
	Window
	// Since is the first day of the window (midnight UTC); day i of Daily
	// and of each model's Daily is Since plus i days.
	Since time.Time
	// Models are every model the organisation has feedback for, for
	// choosing one.
	Models []string
	Counts
	Daily        []Counts
	ByModel      []Model // by name
	Dimensions   []Dimension
	Distribution []Bucket // ratings 5 down to 1
	Statuses     []Bucket // in the order of Statuses
	Curators     []Curator
}

// Service reads the numbers.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds the feedback statistics on pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// Report sums up the organisation's feedback in the window ending at now.
func (s *Service) Report(ctx context.Context, orgID uuid.UUID, w Window, now time.Time) (Report, error) {
	now = now.UTC()
	since := now.Truncate(24*time.Hour).AddDate(0, 0, -(w.Days - 1))
	r := Report{Window: w, Since: since}
	q := db.New(s.Pool)

	daily, err := q.StatsListDaily(ctx, db.StatsListDailyParams{OrgID: orgID, Since: since, Until: now, Model: w.Model})
	if err != nil {
		return r, err
	}
	dims, err := q.StatsGetDimensions(ctx, db.StatsGetDimensionsParams{OrgID: orgID, Since: since, Until: now, Model: w.Model})
	if err != nil {
		return r, err
	}
	dist, err := q.StatsListRatingDistribution(ctx, db.StatsListRatingDistributionParams{OrgID: orgID, Since: since, Until: now, Model: w.Model})
	if err != nil {
		return r, err
	}
	statuses, err := q.StatsCountByStatus(ctx, db.StatsCountByStatusParams{OrgID: orgID, Since: since, Until: now, Model: w.Model})
	if err != nil {
		return r, err
	}
	curators, err := q.StatsListCuratorThroughput(ctx, db.StatsListCuratorThroughputParams{OrgID: orgID, Since: since, Until: now, Model: w.Model})
	if err != nil {
		return r, err
	}
	if r.Models, err = q.FeedbackListModels(ctx, orgID); err != nil {
		return r, err
	}

	r.fold(daily)
	r.Dimensions = []Dimension{
		{Name: "Accuracy", Count: int(dims.AccuracyN), Average: dims.Accuracy},
		{Name: "Helpfulness", Count: int(dims.HelpfulnessN), Average: dims.Helpfulness},
		{Name: "Clarity", Count: int(dims.ClarityN), Average: dims.Clarity},
		{Name: "Safety", Count: int(dims.SafetyN), Average: dims.Safety},
	}
	r.Distribution = ratingBuckets(dist)
	r.Statuses = statusBuckets(statuses)
	for _, c := range curators {
		r.Curators = append(r.Curators, Curator{Label: c.ActorLabel, Actions: int(c.Actions), Approved: int(c.Approved),
			Rejected: int(c.Rejected), Corrected: int(c.Corrected), Last: c.LastAction})
	}
	return r, nil
}

// fold adds the per-day, per-model rows into the window's totals, the
// days and the models; a day without feedback counts zero.
func (r *Report) fold(rows []db.StatsListDailyRow) {
	dayIndex := make(map[string]int, r.Days)
	for i := range r.Days {
		dayIndex[r.Since.AddDate(0, 0, i).Format("2006-01-02")] = i
	}
	r.Daily = make([]Counts, r.Days)
	byName := map[string]*Model{}
	for _, row := range rows {
		i, ok := dayIndex[row.Day]
		if !ok {
			continue
		}
		c := Counts{Total: int(row.Total), ThumbsUp: int(row.ThumbsUp), ThumbsDown: int(row.ThumbsDown),
			Ratings: int(row.Ratings), RatingSum: int(row.RatingSum)}
		r.Counts.add(c)
		r.Daily[i].add(c)
		m := byName[row.Model]
		if m == nil {
			m = &Model{Name: row.Model, Daily: make([]Counts, r.Days)}
			byName[row.Model] = m
		}
		m.Counts.add(c)
		m.Daily[i].add(c)
	}
	for _, m := range byName {
		r.ByModel = append(r.ByModel, *m)
	}
	sort.Slice(r.ByModel, func(i, j int) bool { return r.ByModel[i].Name < r.ByModel[j].Name })
}

func ratingBuckets(rows []db.StatsListRatingDistributionRow) []Bucket {
	counts := make([]int, 6)
	for _, r := range rows {
		if r.Rating >= 1 && r.Rating <= 5 {
			counts[r.Rating] = int(r.Count)
		}
	}
	out := make([]Bucket, 0, 5)
	for r := 5; r >= 1; r-- {
		out = append(out, Bucket{Label: strconv.Itoa(r), Count: counts[r]})
	}
	return out
}

func statusBuckets(rows []db.StatsCountByStatusRow) []Bucket {
	counts := map[string]int{}
	for _, r := range rows {
		counts[string(r.Status)] = int(r.Count)
	}
	out := make([]Bucket, 0, len(Statuses))
	for _, s := range Statuses {
		out = append(out, Bucket{Label: s, Count: counts[s]})
	}
	return out
}
