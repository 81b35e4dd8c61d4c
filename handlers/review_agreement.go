package handlers

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/review"
	"github.com/curate/curate/views"
)

// questionRef names one rubric question: ?rubric_id=&question=.
type questionRef struct {
	RubricID uuid.UUID
	Key      string
}

// agreementScopeQuestion reads the scope of an agreement (the queue's
// filter), the kind of label asked for and a rubric's question, if one is
// asked for, refusing anything else.
func agreementScopeQuestion(c echo.Context) (feedback.Filter, string, *questionRef, error) {
	q, err := queryParams(c, append([]string{"kind", "rubric_id", "question"}, feedback.FilterParams...)...)
	if err != nil {
		return feedback.Filter{}, "", nil, err
	}
	f, err := feedback.ParseFilter(q)
	if err != nil {
		return f, "", nil, err
	}
	kind := q.Get("kind")
	if _, ok := review.KindLevel(kind); kind != "" && !ok {
		return f, "", nil, errs.InvalidField("kind", "must be one of status, thumbs, rating, accuracy, helpfulness, clarity, safety, tags")
	}
	if q.Get("rubric_id") == "" && q.Get("question") == "" {
		return f, kind, nil, nil
	}
	id, err := uuid.Parse(q.Get("rubric_id"))
	if err != nil {
		return f, "", nil, errs.InvalidField("rubric_id", "must be a rubric's id, with question")
	}
	if q.Get("question") == "" {
		return f, "", nil, errs.InvalidField("question", "is required with rubric_id: the key of one of its questions")
	}
	return f, kind, &questionRef{RubricID: id, Key: q.Get("question")}, nil
}

// ReviewAgreement is the agreement page for a scope: ?tag=, ?dataset_id=
// or any queue filter, and ?kind= for the pairs and the trend.
func (h *Handlers) ReviewAgreement(c echo.Context) error {
	f, kind, question, err := agreementScopeQuestion(c)
	if err != nil {
		return err
	}
	if kind == "" {
		kind = "status"
	}
	caller := CallerOf(c)
	a, err := h.Review.Agreement(ctx(c), caller.OrgID, f, nil)
	if err != nil {
		return err
	}
	filter := f.Values()
	v := views.ReviewAgreementView{FilterQuery: filter.Encode(), Tag: f.Tag, Items: a.Items, Labels: a.Labels,
		Truncated: a.Truncated, Kind: kind, APIURL: "/api/agreement" + withPrefix("?", filter.Encode())}
	// A rubric's question: its row joins the kinds', and the matrix,
	// pairs and trend show it.
	kinds, reviewers := a.Kinds, a.Reviewers
	titles := map[string]string{}
	if question != nil {
		qa, err := h.Review.QuestionAgreement(ctx(c), caller.OrgID, f, question.RubricID, question.Key)
		if err != nil {
			return err
		}
		k := qa.KindAgreement
		k.Kind = "question:" + qa.Question.Key
		kind, titles[k.Kind] = k.Kind, qa.Question.Title+" ("+qa.Rubric.Name+")"
		kinds, reviewers = append(append([]review.KindAgreement(nil), a.Kinds...), k), qa.Reviewers
		v.Kind, v.Question = kind, titles[k.Kind]
		api := url.Values{}
		for key, vals := range filter {
			api[key] = vals
		}
		api.Set("rubric_id", question.RubricID.String())
		api.Set("question", question.Key)
		v.APIURL = "/api/agreement?" + api.Encode()
		v.Items, v.Labels = max(v.Items, qa.Items), v.Labels+qa.Answers
		v.Truncated = v.Truncated || qa.Truncated
	}
	questions, err := h.Review.AgreementQuestions(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	for _, q := range questions {
		link := url.Values{}
		for key, vals := range filter {
			link[key] = vals
		}
		link.Set("rubric_id", q.RubricID.String())
		link.Set("question", q.Key)
		v.QuestionLinks = append(v.QuestionLinks, views.AgreementKindLink{Kind: "question:" + q.Key, Label: q.Title,
			URL: "/review/agreement?" + link.Encode(), Active: question != nil && question.RubricID == q.RubricID && question.Key == q.Key})
	}
	if f.DatasetID != uuid.Nil {
		v.DatasetID = f.DatasetID.String()
	}
	rows, _, err := h.Datasets.List(ctx(c), caller.OrgID, datasets.ListFilter{}, nil, 200)
	if err != nil {
		return err
	}
	datasetName := ""
	for _, d := range rows {
		v.Datasets = append(v.Datasets, views.Option{Value: d.TrainingDataset.ID.String(), Label: d.TrainingDataset.Name})
		if d.TrainingDataset.ID == f.DatasetID {
			datasetName = d.TrainingDataset.Name
		}
	}
	v.Scope = scopeText(f, datasetName)
	plans, err := h.Review.Plans(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	for _, p := range plans {
		v.Plans = append(v.Plans, views.Option{Value: "/review/agreement" + withPrefix("?", p.Plan.Filter), Label: p.Plan.Name})
	}
	for _, r := range reviewers {
		v.Reviewers = append(v.Reviewers, r.Email)
	}
	for _, k := range kinds {
		if k.Labels == 0 {
			if titles[k.Kind] == "" {
				v.Unlabelled = append(v.Unlabelled, k.Kind)
			}
			continue
		}
		row := views.AgreementKindRow{Kind: k.Kind, Title: titles[k.Kind], Level: string(k.Level), Alpha: figureView(k.Alpha), Fleiss: figureView(k.Fleiss)}
		if k.AlphaInterval != nil {
			f := figureView(*k.AlphaInterval)
			row.AlphaInterval = &f
		}
		v.Kinds = append(v.Kinds, row)
		link := url.Values{}
		for key, vals := range filter {
			link[key] = vals
		}
		link.Set("kind", k.Kind)
		if titles[k.Kind] == "" {
			v.KindLinks = append(v.KindLinks, views.AgreementKindLink{Kind: k.Kind, Label: views.Label(k.Kind),
				URL: "/review/agreement?" + link.Encode(), Active: k.Kind == kind})
		}
		if k.Kind != kind {
			continue
		}
		index := map[string]int{}
		for i, r := range reviewers {
			index[r.ID.String()] = i
		}
		v.Matrix = make([][]views.AgreementCell, len(reviewers))
		for i := range v.Matrix {
			v.Matrix[i] = make([]views.AgreementCell, len(reviewers))
			v.Matrix[i][i].Self = true
		}
		for _, p := range k.Pairs {
			cell := views.AgreementCell{Figure: figureView(p.Figure), Agreed: p.Agreed, Shared: true}
			i, j := index[p.A.ID.String()], index[p.B.ID.String()]
			v.Matrix[i][j], v.Matrix[j][i] = cell, cell
			v.Pairs = append(v.Pairs, views.AgreementPairRow{A: p.A.Email, B: p.B.Email, Figure: cell.Figure, Agreed: p.Agreed})
		}
		for _, t := range k.Trend {
			row := views.AgreementTrendRow{Week: t.Week.Format("2006-01-02"), Figure: figureView(t.Figure)}
			if t.Value != nil {
				row.Bar = int((max(-1, min(1, *t.Value)) + 1) * 50)
			}
			v.Trend = append(v.Trend, row)
		}
	}
	return render(c, http.StatusOK, views.ReviewAgreementPage(h.page(c, "Agreement between reviewers", "queue"), v))
}

// scopeText says which items an agreement is over.
func scopeText(f feedback.Filter, datasetName string) string {
	q := f.Values()
	switch {
	case len(q) == 0:
		return "All reviewed feedback"
	case len(q) == 1 && f.Tag != "":
		return "Items tagged “" + f.Tag + "”"
	case len(q) == 1 && f.DatasetID != uuid.Nil && datasetName != "":
		return "Members of the dataset “" + datasetName + "”"
	}
	return "Items of the queue filter"
}

func figureView(f review.Figure) views.AgreementFigure {
	out := views.AgreementFigure{Value: "—", Note: f.Note, Units: f.Units, Raters: f.Raters, Pairable: f.Pairable}
	if f.Value != nil {
		out.Value, out.Known = strconv.FormatFloat(*f.Value, 'f', 3, 64), true
	}
	return out
}
