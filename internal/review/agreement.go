package review

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/stats"
)

// How well reviewers agree, from their submitted labels of the items a
// queue filter selects, for each kind of label: Krippendorff's alpha over
// every reviewer (labels may be missing), Fleiss' kappa over the items
// with the usual number of labels, Cohen's kappa for each pair of
// reviewers, and alpha week by week. Every figure comes from
// internal/stats and carries the counts behind it.

// MaxAgreementLabels bounds the labels one computation reads: the newest.
const MaxAgreementLabels = 50000

// KindSpec is a kind of label and its level of measurement.
type KindSpec struct {
	Kind  string
	Level stats.Level
}

// AgreementKinds are the kinds of label agreement is measured on: status,
// thumbs (approved or not) and tags are categories; the rating and each
// rated dimension are ordinal (and interval, shown beside).
var AgreementKinds = []KindSpec{
	{"status", stats.LevelNominal}, {"thumbs", stats.LevelNominal}, {"rating", stats.LevelOrdinal},
	{"accuracy", stats.LevelOrdinal}, {"helpfulness", stats.LevelOrdinal}, {"clarity", stats.LevelOrdinal},
	{"safety", stats.LevelOrdinal}, {"tags", stats.LevelNominal},
}

// KindLevel is a kind's level, and whether the kind is known.
func KindLevel(kind string) (stats.Level, bool) {
	for _, k := range AgreementKinds {
		if k.Kind == kind {
			return k.Level, true
		}
	}
	return "", false
}

// Reviewer names a reviewer.
type Reviewer struct {
	ID    uuid.UUID `json:"id"`
	Email string    `json:"email"`
}

// Figure is one agreement coefficient with the counts behind it. Value is
// nil when it cannot be computed, and Note says why.
type Figure struct {
	Metric   string   `json:"metric"`
	Level    string   `json:"level"`
	Value    *float64 `json:"value"`
	Units    int      `json:"units"`
	Raters   int      `json:"raters"`
	Pairable int      `json:"pairable_values"`
	Note     string   `json:"note,omitempty"`
}

// Pair is Cohen's kappa between two reviewers over the units both labelled.
type Pair struct {
	A, B Reviewer
	Figure
	// Agreed counts the units both labelled alike.
	Agreed int `json:"agreed"`
}

// TrendPoint is alpha over the units last labelled in one week.
type TrendPoint struct {
	Week time.Time // Monday, 00:00 UTC
	Figure
}

// KindAgreement is the agreement on one kind of label.
type KindAgreement struct {
	Kind  string
	Level stats.Level
	// Labels counts the labels of this kind: 0 when no reviewer gave one.
	Labels int
	Alpha  Figure
	// AlphaInterval is alpha at the interval level, for scores.
	AlphaInterval *Figure
	Fleiss        Figure
	Pairs         []Pair
	Trend         []TrendPoint
}

// Agreement is how well reviewers agree on the items of a filter.
type Agreement struct {
	Items     int  // items with submitted labels
	Labels    int  // submitted labels read
	Truncated bool // more than MaxAgreementLabels: the newest were read
	Reviewers []Reviewer
	Kinds     []KindAgreement
}

// Record is one submitted label, as agreement reads it.
type Record struct {
	Item      uuid.UUID
	Reviewer  Reviewer
	Submitted time.Time
	Label
}

// Agreement measures agreement over the submitted labels of the items f
// selects whose reviews are complete (or whose plan has ended), for the
// kinds asked (nil: every kind). An open item's labels are left out: a
// figure over them could tell its last reviewer what the others said.
func (s *Service) Agreement(ctx context.Context, orgID uuid.UUID, f feedback.Filter, kinds []string) (Agreement, error) {
	u := unstartedParams(f, orgID)
	rows, err := db.New(s.Pool).ReviewLabelListForAgreement(ctx, db.ReviewLabelListForAgreementParams{
		OrgID: orgID, Status: u.Status, FeedbackType: u.FeedbackType, Source: u.Source, RatingMin: u.RatingMin,
		RatingMax: u.RatingMax, DimBelow: u.DimBelow, Tag: u.Tag, Model: u.Model, AssigneeID: u.AssigneeID,
		CreatedFrom: u.CreatedFrom, CreatedTo: u.CreatedTo, WithDuplicates: u.WithDuplicates, PiiOnly: u.PiiOnly, Q: u.Q,
		DatasetID: u.DatasetID, SafetyOnly: u.SafetyOnly, RowLimit: MaxAgreementLabels + 1,
	})
	if err != nil {
		return Agreement{}, err
	}
	truncated := len(rows) > MaxAgreementLabels
	if truncated {
		rows = rows[:MaxAgreementLabels]
	}
	recs := make([]Record, len(rows))
	for i, r := range rows {
		recs[i] = Record{Item: r.FeedbackID, Reviewer: Reviewer{ID: r.ReviewerID, Email: r.ReviewerEmail}, Submitted: r.SubmittedAt,
			Label: Label{Rating: intp(r.Rating), Dimensions: [4]*int{intp(r.DimAccuracy), intp(r.DimHelpfulness), intp(r.DimClarity), intp(r.DimSafety)},
				Tags: r.Tags}}
		if r.Status.Valid {
			recs[i].Status = string(r.Status.ReviewStatus)
		}
	}
	a := Compute(recs, kinds)
	a.Truncated = truncated
	return a, nil
}

// unit is one thing labelled: an item, or for tags an item and one tag.
type unit struct {
	latest time.Time
	labels map[uuid.UUID]stats.Rating // by reviewer
}

// Compute measures agreement over labels, for the kinds asked (nil: all).
func Compute(recs []Record, kinds []string) Agreement {
	var a Agreement
	items := map[uuid.UUID][]Record{}
	var order []uuid.UUID
	seen := map[uuid.UUID]bool{}
	for _, r := range recs {
		if _, ok := items[r.Item]; !ok {
			order = append(order, r.Item)
		}
		items[r.Item] = append(items[r.Item], r)
		if !seen[r.Reviewer.ID] {
			seen[r.Reviewer.ID] = true
			a.Reviewers = append(a.Reviewers, r.Reviewer)
		}
	}
	// Units and reviewers in a fixed order, so a figure never depends on
	// the order labels were read in.
	slices.SortFunc(order, func(x, y uuid.UUID) int { return strings.Compare(x.String(), y.String()) })
	slices.SortFunc(a.Reviewers, func(x, y Reviewer) int {
		return cmp.Or(strings.Compare(x.Email, y.Email), strings.Compare(x.ID.String(), y.ID.String()))
	})
	a.Items, a.Labels = len(order), len(recs)
	for _, k := range AgreementKinds {
		if kinds != nil && !slices.Contains(kinds, k.Kind) {
			continue
		}
		a.Kinds = append(a.Kinds, kindAgreement(k.Kind, k.Level, unitsOf(k.Kind, order, items), a.Reviewers))
	}
	return a
}

// kindAgreement is every figure of one kind of label (or one rubric
// question) over its units.
func kindAgreement(kind string, level stats.Level, units []unit, reviewers []Reviewer) KindAgreement {
	ka := KindAgreement{Kind: kind, Level: level}
	for _, u := range units {
		ka.Labels += len(u.labels)
	}
	m := matrix(units, reviewers)
	ka.Alpha = figure(stats.Alpha(m, level))
	ka.Alpha.Metric, ka.Alpha.Level = stats.MetricKrippendorffAlpha, string(level)
	if level == stats.LevelOrdinal {
		f := figure(stats.Alpha(m, stats.LevelInterval))
		f.Metric, f.Level = stats.MetricKrippendorffAlpha, string(stats.LevelInterval)
		ka.AlphaInterval = &f
	}
	ka.Fleiss = fleiss(units, reviewers)
	ka.Pairs = pairs(units, reviewers)
	ka.Trend = trend(units, reviewers, level)
	return ka
}

// unitsOf turns the items' labels into units of one kind.
func unitsOf(kind string, order []uuid.UUID, items map[uuid.UUID][]Record) []unit {
	var out []unit
	for _, id := range order {
		recs := items[id]
		latest := recs[0].Submitted
		for _, r := range recs {
			if r.Submitted.After(latest) {
				latest = r.Submitted
			}
		}
		if kind == "tags" {
			// One unit per tag any reviewer gave the item: whether each
			// reviewer gave it.
			var tags []string
			for _, r := range recs {
				for _, t := range r.Tags {
					if !slices.Contains(tags, t) {
						tags = append(tags, t)
					}
				}
			}
			slices.Sort(tags)
			for _, t := range tags {
				u := unit{latest: latest, labels: map[uuid.UUID]stats.Rating{}}
				for _, r := range recs {
					u.labels[r.Reviewer.ID] = stats.Text(yesNo(slices.Contains(r.Tags, t)))
				}
				out = append(out, u)
			}
			continue
		}
		u := unit{latest: latest, labels: map[uuid.UUID]stats.Rating{}}
		for _, r := range recs {
			if v, ok := value(kind, r.Label); ok {
				u.labels[r.Reviewer.ID] = v
			}
		}
		if len(u.labels) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// value is a label's value of one kind, and whether it was given.
func value(kind string, l Label) (stats.Rating, bool) {
	score := func(n *int) (stats.Rating, bool) {
		if n == nil {
			return stats.Rating{}, false
		}
		return stats.Number(float64(*n)), true
	}
	switch kind {
	case "status":
		return stats.Text(l.Status), l.Status != ""
	case "thumbs":
		return stats.Text(Thumb(l.Status)), l.Status != ""
	case "rating":
		return score(l.Rating)
	}
	for i, d := range Dimensions {
		if d == kind {
			return score(l.Dimensions[i])
		}
	}
	return stats.Rating{}, false
}

// matrix is the units' ratings with one column per reviewer.
func matrix(units []unit, reviewers []Reviewer) stats.Ratings {
	m := make(stats.Ratings, len(units))
	for i, u := range units {
		m[i] = make([]stats.Rating, len(reviewers))
		for j, r := range reviewers {
			m[i][j] = u.labels[r.ID]
		}
	}
	return m
}

// figure is a reliability as a Figure; an error leaves the value out and
// says why.
func figure(rel stats.Reliability, err error) Figure {
	f := Figure{Metric: rel.Metric, Level: string(rel.Level), Units: rel.Units, Raters: rel.Raters, Pairable: rel.Pairable}
	if err != nil {
		f.Note = reason(err)
		return f
	}
	v := rel.Value
	f.Value = &v
	return f
}

// reason is a statistics error's message without the kind it wraps.
func reason(err error) string {
	msg := err.Error()
	for _, kind := range []error{stats.ErrNotEnoughData, stats.ErrInvalid} {
		if errors.Is(err, kind) {
			msg = strings.TrimPrefix(msg, kind.Error()+": ")
		}
	}
	return msg
}

// fleiss is Fleiss' kappa over the units with the usual number of labels
// (the most common count of 2 or more; the larger on a tie), since it
// takes a fixed number of labels per unit.
func fleiss(units []unit, reviewers []Reviewer) Figure {
	count := map[int]int{}
	for _, u := range units {
		if n := len(u.labels); n >= 2 {
			count[n]++
		}
	}
	m := 0
	for n, c := range count {
		if c > count[m] || (c == count[m] && n > m) {
			m = n
		}
	}
	var fixed []unit
	for _, u := range units {
		if len(u.labels) == m {
			fixed = append(fixed, u)
		}
	}
	if len(fixed) == 0 {
		return Figure{Metric: stats.MetricFleissKappa, Level: string(stats.LevelNominal), Note: "no item has labels from 2 reviewers or more"}
	}
	f := figure(stats.Fleiss(matrix(fixed, reviewers)))
	f.Metric, f.Level = stats.MetricFleissKappa, string(stats.LevelNominal)
	return f
}

// pairs is Cohen's kappa for each pair of reviewers with a unit in common.
func pairs(units []unit, reviewers []Reviewer) []Pair {
	var out []Pair
	for i := range reviewers {
		for j := i + 1; j < len(reviewers); j++ {
			a, b := reviewers[i], reviewers[j]
			var m stats.Ratings
			agreed := 0
			for _, u := range units {
				x, okx := u.labels[a.ID]
				y, oky := u.labels[b.ID]
				if okx && oky {
					m = append(m, []stats.Rating{x, y})
					if x == y {
						agreed++
					}
				}
			}
			if len(m) == 0 {
				continue
			}
			rel, err := stats.Cohen(m)
			f := figure(rel, err)
			f.Metric, f.Level = stats.MetricCohenKappa, string(stats.LevelNominal)
			f.Units, f.Raters, f.Pairable = len(m), 2, 2*len(m)
			out = append(out, Pair{A: a, B: b, Figure: f, Agreed: agreed})
		}
	}
	return out
}

// trend is alpha over each week's units, by the week of a unit's last
// label, oldest week first.
func trend(units []unit, reviewers []Reviewer, level stats.Level) []TrendPoint {
	byWeek := map[time.Time][]unit{}
	for _, u := range units {
		w := weekOf(u.latest)
		byWeek[w] = append(byWeek[w], u)
	}
	var out []TrendPoint
	for w, us := range byWeek {
		f := figure(stats.Alpha(matrix(us, reviewers), level))
		f.Metric, f.Level = stats.MetricKrippendorffAlpha, string(level)
		if f.Value == nil {
			f.Units = len(us)
		}
		out = append(out, TrendPoint{Week: w, Figure: f})
	}
	slices.SortFunc(out, func(x, y TrendPoint) int { return x.Week.Compare(y.Week) })
	return out
}

// weekOf is the Monday, 00:00 UTC, of t's week.
func weekOf(t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	back := (int(day.Weekday()) + 6) % 7
	return day.AddDate(0, 0, -back)
}
