package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/review"
	"github.com/curate/curate/internal/stats"
)

// agreementRequest is POST /api/stats/agreement's body: one row per unit,
// one entry per rater, each a number, a string or null.
type agreementRequest struct {
	Metric  string              `json:"metric"`
	Level   string              `json:"level"`
	Ratings [][]json.RawMessage `json:"ratings"`
	// Question, with RubricID, asks for one rubric question's agreement
	// over the answers stored, at the question's level, instead of a
	// matrix; Filter (a queue filter) narrows the items.
	RubricID string `json:"rubric_id"`
	Question string `json:"question"`
	Filter   string `json:"filter"`
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
	if in.Question != "" || in.RubricID != "" {
		return h.questionAgreement(c, in)
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

// questionAgreement is POST /api/stats/agreement for one rubric question.
func (h *Handlers) questionAgreement(c echo.Context, in agreementRequest) error {
	v := &errs.Invalid{}
	rubricID, err := uuid.Parse(in.RubricID)
	if err != nil {
		v.Add("rubric_id", "must be a rubric's id, with question")
	}
	if in.Question == "" {
		v.Add("question", "is required with rubric_id: the key of one of its questions")
	}
	if in.Ratings != nil || in.Metric != "" || in.Level != "" {
		v.Add("ratings", "give either ratings (with metric and level) or a rubric's question, not both: the question's kind sets the level")
	}
	var f feedback.Filter
	if in.Filter != "" {
		if f, err = parseFilterText(in.Filter); err != nil {
			v.Add("filter", "is not a queue filter: %s", filterProblem(err))
		}
	}
	if v.Has() {
		return v
	}
	qa, err := h.Review.QuestionAgreement(ctx(c), CallerOf(c).OrgID, f, rubricID, in.Question)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toQuestionObject(qa))
}

// questionObject is one rubric question's agreement: alpha at the
// question's level in value (null, with a note, when it cannot be
// computed), and the kind's other figures beside it.
type questionObject struct {
	RubricID       uuid.UUID        `json:"rubric_id"`
	RubricVersion  int              `json:"rubric_version"`
	Question       string           `json:"question"`
	QuestionKind   string           `json:"question_kind"`
	Metric         string           `json:"metric"`
	Level          string           `json:"level"`
	Value          *float64         `json:"value"`
	Units          int              `json:"units"`
	Raters         int              `json:"raters"`
	PairableValues int              `json:"pairable_values"`
	Note           string           `json:"note,omitempty"`
	Items          int              `json:"items"`
	Answers        int              `json:"answers"`
	Truncated      bool             `json:"truncated"`
	Reviewers      []reviewerObject `json:"reviewers"`
	Detail         kindObject       `json:"detail"`
}

func toQuestionObject(qa review.QuestionAgreement) questionObject {
	out := questionObject{RubricID: qa.Rubric.ID, RubricVersion: qa.Rubric.Version, Question: qa.Question.Key, QuestionKind: qa.Question.Kind,
		Metric: qa.Alpha.Metric, Level: qa.Alpha.Level, Value: qa.Alpha.Value, Units: qa.Alpha.Units, Raters: qa.Alpha.Raters,
		PairableValues: qa.Alpha.Pairable, Note: qa.Alpha.Note, Items: qa.Items, Answers: qa.Answers, Truncated: qa.Truncated,
		Reviewers: []reviewerObject{}, Detail: toKindObject(qa.KindAgreement)}
	for _, r := range qa.Reviewers {
		out.Reviewers = append(out.Reviewers, reviewerObject{ID: r.ID, Email: r.Email})
	}
	return out
}
