package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/stats"
)

// agreementRequest is POST /api/stats/agreement's body: one row per unit,
// one entry per rater, each a number, a string or null.
type agreementRequest struct {
	Metric  string              `json:"metric"`
	Level   string              `json:"level"`
	Ratings [][]json.RawMessage `json:"ratings"`
}

// Limits on one agreement request.
const (
	maxAgreementUnits  = 10000
	maxAgreementRaters = 100
	maxAgreementLabel  = 200 // bytes of a text label
)

// APIStatsAgreement computes the agreement between raters from a ratings
// matrix: Cohen's kappa, Fleiss' kappa or Krippendorff's alpha.
func (h *Handlers) APIStatsAgreement(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in agreementRequest
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	level, ratings, err := in.parse()
	if err != nil {
		return err
	}
	var rel stats.Reliability
	switch in.Metric {
	case stats.MetricCohenKappa:
		rel, err = stats.Cohen(ratings)
	case stats.MetricFleissKappa:
		rel, err = stats.Fleiss(ratings)
	default:
		rel, err = stats.Alpha(ratings, level)
	}
	var unit *stats.UnitError
	switch {
	case errors.As(err, &unit):
		return errs.InvalidField(fmt.Sprintf("ratings[%d]", unit.Unit), "%s", unit.Reason)
	case errors.Is(err, stats.ErrNotEnoughData), errors.Is(err, stats.ErrInvalid):
		return errs.InvalidField("ratings", "%s", reason(err))
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, struct {
		Value          float64 `json:"value"`
		Units          int     `json:"units"`
		Raters         int     `json:"raters"`
		PairableValues int     `json:"pairable_values"`
	}{rel.Value, rel.Units, rel.Raters, rel.Pairable})
}

// parse checks the metric, the level and the shape of the matrix, and
// reads each entry; what the labels may be at a level is the statistics'
// own check.
func (r agreementRequest) parse() (stats.Level, stats.Ratings, error) {
	v := &errs.Invalid{}
	switch r.Metric {
	case stats.MetricCohenKappa, stats.MetricFleissKappa, stats.MetricKrippendorffAlpha:
	default:
		v.Add("metric", "must be cohen_kappa, fleiss_kappa or krippendorff_alpha")
	}
	level := stats.Level(r.Level)
	switch level {
	case "":
		level = stats.LevelNominal
	case stats.LevelNominal:
	case stats.LevelOrdinal, stats.LevelInterval, stats.LevelRatio:
		if r.Metric == stats.MetricCohenKappa || r.Metric == stats.MetricFleissKappa {
			v.Add("level", "applies to krippendorff_alpha; Cohen's and Fleiss' kappa take labels as nominal categories")
		}
	default:
		v.Add("level", "must be nominal, ordinal, interval or ratio")
	}
	switch {
	case len(r.Ratings) > maxAgreementUnits:
		v.Add("ratings", "has %d units; at most %d", len(r.Ratings), maxAgreementUnits)
	case len(r.Ratings) > 0 && len(r.Ratings[0]) > maxAgreementRaters:
		v.Add("ratings", "has %d raters; at most %d", len(r.Ratings[0]), maxAgreementRaters)
	}
	if v.Has() {
		return "", nil, v
	}
	ratings := make(stats.Ratings, len(r.Ratings))
	for u, row := range r.Ratings {
		if len(row) > maxAgreementRaters {
			v.Add(fmt.Sprintf("ratings[%d]", u), "has %d entries; at most %d raters", len(row), maxAgreementRaters)
			continue
		}
		ratings[u] = make([]stats.Rating, len(row))
		for i, raw := range row {
			label, problem := readLabel(raw)
			if problem != "" {
				v.Add(fmt.Sprintf("ratings[%d]", u), "rater %d's label %s", i, problem)
				break
			}
			ratings[u][i] = label
		}
	}
	return level, ratings, v.Err()
}

// readLabel reads one entry of the matrix: null, a finite number or a
// text label.
func readLabel(raw json.RawMessage) (stats.Rating, string) {
	s := strings.TrimSpace(string(raw))
	switch {
	case s == "null":
		return stats.Rating{}, ""
	case strings.HasPrefix(s, `"`):
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return stats.Rating{}, "is not a valid string"
		}
		switch {
		case strings.TrimSpace(text) == "":
			return stats.Rating{}, "is empty: send null where a rater gave no label"
		case len(text) > maxAgreementLabel:
			return stats.Rating{}, fmt.Sprintf("is %d bytes; a label is at most %d", len(text), maxAgreementLabel)
		}
		return stats.Text(text), ""
	case s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9'):
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			return stats.Rating{}, fmt.Sprintf("%s is not a finite number", s)
		}
		return stats.Number(x), ""
	}
	what := "an array"
	switch s[0] {
	case '{':
		what = "an object"
	case 't', 'f':
		what = s
	}
	return stats.Rating{}, fmt.Sprintf("is %s: give a number, a string or null", what)
}

// reason is a statistics error's message without the kind it wraps.
func reason(err error) string {
	msg := err.Error()
	for _, kind := range []error{stats.ErrNotEnoughData, stats.ErrInvalid} {
		msg = strings.TrimPrefix(msg, kind.Error()+": ")
	}
	return msg
}
