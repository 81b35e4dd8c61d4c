package review

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/rubrics"
	"github.com/curate/curate/internal/stats"
)

// Agreement on one question of a rubric: the same figures as a kind of
// label (alpha at the question's level, Fleiss' kappa, Cohen's kappa per
// pair, the weekly trend), over units the question's kind defines (see
// rubrics.Question.Units): a label or a rating is one unit per item, each
// option of a labels question or a ranking is one, and each token of the
// answer is one for spans, labelled with its span's label or "none".

// QuestionAgreement is a question's agreement with the counts behind it.
type QuestionAgreement struct {
	Rubric    rubrics.Rubric
	Question  rubrics.Question
	Items     int  // items with answers
	Answers   int  // answers read
	Truncated bool // more than MaxAgreementLabels: the newest were read
	Reviewers []Reviewer
	KindAgreement
}

// answerRecord is one reviewer's answer to a question of an item.
type answerRecord struct {
	item      uuid.UUID
	reviewer  Reviewer
	submitted time.Time
	value     json.RawMessage
	response  string
}

// QuestionAgreement measures agreement on the question key of rubric r
// over the answers to r of the items f selects, leaving out items whose
// overlapping review is still open (as Agreement does) and adjudicators'
// answers.
func (s *Service) QuestionAgreement(ctx context.Context, orgID uuid.UUID, f feedback.Filter, rubricID uuid.UUID, key string) (QuestionAgreement, error) {
	rv, err := db.New(s.Pool).RubricGet(ctx, db.RubricGetParams{OrgID: orgID, ID: rubricID})
	if errors.Is(err, pgx.ErrNoRows) {
		return QuestionAgreement{}, errs.InvalidField("rubric_id", "no rubric %s in this organisation", rubricID)
	}
	if err != nil {
		return QuestionAgreement{}, err
	}
	r, err := rubrics.FromVersion(rv)
	if err != nil {
		return QuestionAgreement{}, err
	}
	q, ok := r.Question(key)
	if !ok {
		return QuestionAgreement{}, errs.InvalidField("question", "the rubric %q has no question %q", r.Name, key)
	}
	if q.AgreementLevel() == "" {
		return QuestionAgreement{}, errs.InvalidField("question", "%q is a text question: agreement is measured on labels, ratings, rankings and spans", key)
	}
	u := unstartedParams(f, orgID)
	rows, err := db.New(s.Pool).RubricAnswerListForAgreement(ctx, db.RubricAnswerListForAgreementParams{
		OrgID: orgID, RubricID: r.ID, Status: u.Status, FeedbackType: u.FeedbackType, Source: u.Source, RatingMin: u.RatingMin,
		RatingMax: u.RatingMax, DimBelow: u.DimBelow, Tag: u.Tag, Model: u.Model, AssigneeID: u.AssigneeID,
		CreatedFrom: u.CreatedFrom, CreatedTo: u.CreatedTo, WithDuplicates: u.WithDuplicates, PiiOnly: u.PiiOnly, Q: u.Q,
		DatasetID: u.DatasetID, SafetyOnly: u.SafetyOnly, RowLimit: MaxAgreementLabels + 1,
	})
	if err != nil {
		return QuestionAgreement{}, err
	}
	out := QuestionAgreement{Rubric: r, Question: q}
	if out.Truncated = len(rows) > MaxAgreementLabels; out.Truncated {
		rows = rows[:MaxAgreementLabels]
	}
	var recs []answerRecord
	for _, row := range rows {
		var answers map[string]json.RawMessage
		if json.Unmarshal(row.Answers, &answers) != nil {
			continue
		}
		v, ok := answers[key]
		if !ok {
			continue
		}
		recs = append(recs, answerRecord{item: row.FeedbackID, reviewer: Reviewer{ID: reviewerID(row.ReviewerKey), Email: row.ReviewerLabel},
			submitted: row.UpdatedAt, value: v, response: row.Response})
	}
	computeQuestion(&out, recs)
	return out, nil
}

// computeQuestion fills in a question's agreement from its answers.
func computeQuestion(out *QuestionAgreement, recs []answerRecord) {
	q := out.Question
	items := map[uuid.UUID][]answerRecord{}
	var order []uuid.UUID
	seen := map[uuid.UUID]bool{}
	for _, r := range recs {
		if _, ok := items[r.item]; !ok {
			order = append(order, r.item)
		}
		items[r.item] = append(items[r.item], r)
		if !seen[r.reviewer.ID] {
			seen[r.reviewer.ID] = true
			out.Reviewers = append(out.Reviewers, r.reviewer)
		}
	}
	slices.SortFunc(order, func(x, y uuid.UUID) int { return strings.Compare(x.String(), y.String()) })
	slices.SortFunc(out.Reviewers, func(x, y Reviewer) int {
		if c := strings.Compare(x.Email, y.Email); c != 0 {
			return c
		}
		return strings.Compare(x.ID.String(), y.ID.String())
	})
	out.Items, out.Answers = len(order), len(recs)
	var units []unit
	for _, id := range order {
		rs := items[id]
		latest := rs[0].submitted
		var tokens []rubrics.Token
		if q.Kind == rubrics.KindSpan {
			tokens = rubrics.Tokens(rs[0].response)
		}
		byKey := map[string]*unit{}
		var keys []string
		for _, r := range rs {
			if r.submitted.After(latest) {
				latest = r.submitted
			}
			vals, ok := q.Units(r.value, tokens)
			if !ok {
				continue
			}
			for k, v := range vals {
				u := byKey[k]
				if u == nil {
					u = &unit{labels: map[uuid.UUID]stats.Rating{}}
					byKey[k] = u
					keys = append(keys, k)
				}
				u.labels[r.reviewer.ID] = v
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			u := byKey[k]
			u.latest = latest
			units = append(units, *u)
		}
	}
	out.KindAgreement = kindAgreement(q.Key, q.AgreementLevel(), units, out.Reviewers)
}

// reviewerID is the user or key an answer's reviewer key names.
func reviewerID(key string) uuid.UUID {
	_, id, _ := strings.Cut(key, ":")
	u, err := uuid.Parse(id)
	if err != nil {
		return uuid.NewSHA1(uuid.NameSpaceOID, []byte(key))
	}
	return u
}

// QuestionRef is a rubric question agreement can be measured on.
type QuestionRef struct {
	RubricID uuid.UUID
	Rubric   string
	Key      string
	Title    string
}

// AgreementQuestions are the questions of the organisation's rubrics (at
// their current versions) that agreement measures: all but texts.
func (s *Service) AgreementQuestions(ctx context.Context, orgID uuid.UUID) ([]QuestionRef, error) {
	rows, err := db.New(s.Pool).RubricListByOrg(ctx, db.RubricListByOrgParams{OrgID: orgID, RowLimit: rubrics.MaxListed})
	if err != nil {
		return nil, err
	}
	var out []QuestionRef
	for _, row := range rows {
		r, err := rubrics.FromVersion(row)
		if err != nil {
			return nil, err
		}
		for _, q := range r.Questions {
			if q.AgreementLevel() != "" {
				out = append(out, QuestionRef{RubricID: r.ID, Rubric: r.Name, Key: q.Key, Title: q.Title})
			}
		}
	}
	return out, nil
}
