package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/feedbackstats"
	"github.com/curate/curate/views"
)

// Stats shows feedback volume, thumbs-up rate and average rating per model
// over time, dimension averages, the rating distribution, review progress
// and per-curator throughput for a window (?days=, whole UTC days ending
// today) and an optional model.
func (h *Handlers) Stats(c echo.Context) error {
	w, err := feedbackstats.ParseWindow(c.QueryParam("days"), c.QueryParam("model"))
	if err != nil {
		return err
	}
	r, err := h.FeedbackStats.Report(ctx(c), CallerOf(c).OrgID, w, time.Now())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.StatsPage(h.page(c, "Stats", "stats"), statsView(r)))
}

// statsView writes a report's numbers as the page shows them: the totals,
// the daily table, the per-model table and the charts' series, one point
// per day of the window (rates and averages on days without any are gaps,
// not zeros).
func statsView(r feedbackstats.Report) views.StatsView {
	v := views.StatsView{Days: r.Days, From: r.Since.Format("2006-01-02"), Model: r.Model, Models: r.Models,
		Total: r.Total, ThumbsUp: r.ThumbsUp, ThumbsDown: r.ThumbsDown, Ratings: r.Ratings,
		UpRate: rateText(r.ThumbsUp, r.ThumbsDown), AvgRating: meanText(r.RatingSum, r.Ratings)}
	chart := views.StatsChart{}
	for i, d := range r.Daily {
		day := r.Since.AddDate(0, 0, i)
		chart.X = append(chart.X, day.Unix())
		chart.Volume = append(chart.Volume, d.Total)
		chart.ThumbsUp = append(chart.ThumbsUp, d.ThumbsUp)
		chart.ThumbsDown = append(chart.ThumbsDown, d.ThumbsDown)
		v.Daily = append(v.Daily, views.StatsDay{Day: day.Format("2006-01-02"), Total: d.Total,
			ThumbsUp: d.ThumbsUp, ThumbsDown: d.ThumbsDown, Ratings: d.Ratings, AvgRating: meanText(d.RatingSum, d.Ratings)})
	}
	for _, m := range r.ByModel {
		label := m.Name
		if label == "" {
			label = "(no model)"
		}
		v.ByModel = append(v.ByModel, views.StatsModel{Name: label, Total: m.Total, ThumbsUp: m.ThumbsUp, ThumbsDown: m.ThumbsDown,
			UpRate: rateText(m.ThumbsUp, m.ThumbsDown), Ratings: m.Ratings, AvgRating: meanText(m.RatingSum, m.Ratings)})
		series := views.StatsSeries{Name: label}
		for _, d := range m.Daily {
			series.UpRate = append(series.UpRate, ratio(d.ThumbsUp, d.ThumbsUp+d.ThumbsDown))
			series.AvgRating = append(series.AvgRating, ratio(d.RatingSum, d.Ratings))
		}
		chart.Models = append(chart.Models, series)
	}
	v.Chart = chart
	for _, d := range r.Dimensions {
		v.Dimensions = append(v.Dimensions, views.StatsDimension{Name: d.Name, Count: d.Count, Average: avgText(d.Average, d.Count)})
	}
	v.Distribution = buckets(r.Distribution)
	v.Statuses = buckets(r.Statuses)
	for _, c := range r.Curators {
		v.Curators = append(v.Curators, views.StatsCurator{Label: c.Label, Actions: c.Actions, Approved: c.Approved,
			Rejected: c.Rejected, Corrected: c.Corrected, Last: views.When(c.Last)})
	}
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

func avgText(avg float64, n int) string {
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

// buckets writes counts with each one's share of their sum.
func buckets(in []feedbackstats.Bucket) []views.StatsBucket {
	total := 0
	for _, b := range in {
		total += b.Count
	}
	out := make([]views.StatsBucket, 0, len(in))
	for _, b := range in {
		out = append(out, views.StatsBucket{Label: b.Label, Count: b.Count, Share: shareText(b.Count, total)})
	}
	return out
}

func shareText(n, total int) string {
	if total == 0 {
		return "—"
	}
	return strconv.FormatFloat(100*float64(n)/float64(total), 'f', 1, 64) + "%"
}
