package handlers

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/views"
)

// The stats window: ?days= (default 30, at most 365) whole UTC days ending today.
const (
	statsDefaultDays = 30
	statsMaxDays     = 365
)

// Stats shows feedback volume, thumbs-up rate and average rating per model
// over time, dimension averages, the rating distribution, review progress
// and per-curator throughput for a window and an optional model.
func (h *Handlers) Stats(c echo.Context) error {
	days := statsDefaultDays
	if s := c.QueryParam("days"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > statsMaxDays {
			return errs.InvalidField("days", "must be a whole number of days from 1 to %d", statsMaxDays)
		}
		days = n
	}
	model := c.QueryParam("model")
	if len(model) > 256 {
		return errs.InvalidField("model", "is at most 256 bytes")
	}
	orgID := CallerOf(c).OrgID
	now := time.Now().UTC()
	today := now.Truncate(24 * time.Hour)
	since := today.AddDate(0, 0, -(days - 1))

	daily, err := h.Q.StatsDaily(ctx(c), db.StatsDailyParams{OrgID: orgID, Since: since, Until: now, Model: model})
	if err != nil {
		return err
	}
	dims, err := h.Q.StatsDimensions(ctx(c), db.StatsDimensionsParams{OrgID: orgID, Since: since, Until: now, Model: model})
	if err != nil {
		return err
	}
	dist, err := h.Q.StatsRatingDistribution(ctx(c), db.StatsRatingDistributionParams{OrgID: orgID, Since: since, Until: now, Model: model})
	if err != nil {
		return err
	}
	statuses, err := h.Q.StatsStatusCounts(ctx(c), db.StatsStatusCountsParams{OrgID: orgID, Since: since, Until: now, Model: model})
	if err != nil {
		return err
	}
	curators, err := h.Q.StatsCuratorThroughput(ctx(c), db.StatsCuratorThroughputParams{OrgID: orgID, Since: since, Until: now, Model: model})
	if err != nil {
		return err
	}
	models, err := h.Q.FeedbackModels(ctx(c), orgID)
	if err != nil {
		return err
	}

	v := statsView(since, days, daily)
	v.Model, v.Models = model, models
	v.Dimensions = []views.StatsDimension{
		{Name: "Accuracy", Count: int(dims.AccuracyN), Average: avgText(dims.Accuracy, dims.AccuracyN)},
		{Name: "Helpfulness", Count: int(dims.HelpfulnessN), Average: avgText(dims.Helpfulness, dims.HelpfulnessN)},
		{Name: "Clarity", Count: int(dims.ClarityN), Average: avgText(dims.Clarity, dims.ClarityN)},
		{Name: "Safety", Count: int(dims.SafetyN), Average: avgText(dims.Safety, dims.SafetyN)},
	}
	v.Distribution = ratingDistribution(dist)
	v.Statuses = statusCounts(statuses)
	for _, r := range curators {
		v.Curators = append(v.Curators, views.StatsCurator{Label: r.ActorLabel, Actions: int(r.Actions), Approved: int(r.Approved),
			Rejected: int(r.Rejected), Corrected: int(r.Corrected), Last: views.When(r.LastAction)})
	}
	return render(c, http.StatusOK, views.StatsPage(h.page(c, "Stats", "stats"), v))
}

// statsView folds the per-day, per-model rows into the totals, the daily
// table, the per-model table and the charts' series, one point per day of
// the window (days without feedback count zero; rates and averages on them
// are gaps, not zeros).
func statsView(since time.Time, days int, rows []db.StatsDailyRow) views.StatsView {
	v := views.StatsView{Days: days, From: since.Format("2006-01-02")}
	type acc struct{ total, up, down, ratings, sum int }
	dayIndex := make(map[string]int, days)
	chart := views.StatsChart{}
	perDay := make([]acc, days)
	for i := range days {
		d := since.AddDate(0, 0, i)
		dayIndex[d.Format("2006-01-02")] = i
		chart.X = append(chart.X, d.Unix())
	}
	perModelDay := map[string][]acc{}
	perModel := map[string]*acc{}
	var all acc
	for _, r := range rows {
		i, ok := dayIndex[r.Day]
		if !ok {
			continue
		}
		a := acc{int(r.Total), int(r.ThumbsUp), int(r.ThumbsDown), int(r.Ratings), int(r.RatingSum)}
		add := func(t *acc) {
			t.total += a.total
			t.up += a.up
			t.down += a.down
			t.ratings += a.ratings
			t.sum += a.sum
		}
		add(&perDay[i])
		add(&all)
		if perModelDay[r.Model] == nil {
			perModelDay[r.Model] = make([]acc, days)
			perModel[r.Model] = &acc{}
		}
		add(&perModelDay[r.Model][i])
		add(perModel[r.Model])
	}

	v.Total, v.ThumbsUp, v.ThumbsDown, v.Ratings = all.total, all.up, all.down, all.ratings
	v.UpRate, v.AvgRating = rateText(all.up, all.down), meanText(all.sum, all.ratings)
	for i, d := range perDay {
		chart.Volume = append(chart.Volume, d.total)
		chart.ThumbsUp = append(chart.ThumbsUp, d.up)
		chart.ThumbsDown = append(chart.ThumbsDown, d.down)
		v.Daily = append(v.Daily, views.StatsDay{Day: since.AddDate(0, 0, i).Format("2006-01-02"), Total: d.total,
			ThumbsUp: d.up, ThumbsDown: d.down, Ratings: d.ratings, AvgRating: meanText(d.sum, d.ratings)})
	}
	names := make([]string, 0, len(perModel))
	for m := range perModel {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		t := perModel[m]
		label := m
		if label == "" {
			label = "(no model)"
		}
		v.ByModel = append(v.ByModel, views.StatsModel{Name: label, Total: t.total, ThumbsUp: t.up, ThumbsDown: t.down,
			UpRate: rateText(t.up, t.down), Ratings: t.ratings, AvgRating: meanText(t.sum, t.ratings)})
		series := views.StatsSeries{Name: label}
		for _, d := range perModelDay[m] {
			series.UpRate = append(series.UpRate, ratio(d.up, d.up+d.down))
			series.AvgRating = append(series.AvgRating, ratio(d.sum, d.ratings))
		}
		chart.Models = append(chart.Models, series)
	}
	v.Chart = chart
	return v
}

// ratio is a/b, or nil (a gap in a chart) when b is 0.
func ratio(a, b int) *float64 {
	if b == 0 {
		return nil
	}
	f := float64(int64(float64(a)/float64(b)*1000+0.5)) / 1000
	return &f
}

func meanText(sum, n int) string {
	if n == 0 {
		return "—"
	}
	return strconv.FormatFloat(float64(sum)/float64(n), 'f', 2, 64)
}

func avgText(avg float64, n int64) string {
	if n == 0 {
		return "—"
	}
	return strconv.FormatFloat(avg, 'f', 2, 64)
}

// rateText is the thumbs-up share of thumbs given, as a percentage.
func rateText(up, down int) string {
	if up+down == 0 {
		return "—"
	}
	return strconv.FormatFloat(100*float64(up)/float64(up+down), 'f', 1, 64) + "%"
}

func ratingDistribution(rows []db.StatsRatingDistributionRow) []views.StatsBucket {
	counts := make([]int, 6)
	total := 0
	for _, r := range rows {
		if r.Rating >= 1 && r.Rating <= 5 {
			counts[r.Rating] = int(r.Count)
			total += int(r.Count)
		}
	}
	out := make([]views.StatsBucket, 0, 5)
	for r := 5; r >= 1; r-- {
		out = append(out, views.StatsBucket{Label: strconv.Itoa(r), Count: counts[r], Share: shareText(counts[r], total)})
	}
	return out
}

func statusCounts(rows []db.StatsStatusCountsRow) []views.StatsBucket {
	counts := map[string]int{}
	total := 0
	for _, r := range rows {
		counts[string(r.Status)] = int(r.Count)
		total += int(r.Count)
	}
	order := []string{"pending", "approved", "rejected", "needs_correction", "corrected"}
	out := make([]views.StatsBucket, 0, len(order))
	for _, s := range order {
		out = append(out, views.StatsBucket{Label: s, Count: counts[s], Share: shareText(counts[s], total)})
	}
	return out
}

func shareText(n, total int) string {
	if total == 0 {
		return "—"
	}
	return strconv.FormatFloat(100*float64(n)/float64(total), 'f', 1, 64) + "%"
}
