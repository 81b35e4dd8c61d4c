package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/rubrics"
	"github.com/curate/curate/views"
)

// Rubric pages: the list, the form that defines a rubric or edits it (a
// new version each time), and the answers a curator saves beside an item.

// RubricList is /rubrics.
func (h *Handlers) RubricList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	caller := CallerOf(c)
	rs, err := h.Rubrics.List(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	v := views.RubricListView{IsAdmin: caller.Role.AtLeast(auth.Admin)}
	for _, r := range rs {
		row := views.RubricRow{ID: r.ID.String(), Name: r.Name, Version: r.Version, Tags: r.AppliesTo.Tags, UpdatedBy: r.CreatedBy,
			Updated: views.When(r.CreatedAt)}
		for _, q := range r.Questions {
			row.Questions = append(row.Questions, q.Title+" ("+rubricKindText(q.Kind)+")")
		}
		v.Rubrics = append(v.Rubrics, row)
	}
	return render(c, http.StatusOK, views.RubricListPage(h.page(c, "Rubrics", "queue"), v))
}

func rubricKindText(kind string) string {
	switch kind {
	case rubrics.KindLabel:
		return "one label"
	case rubrics.KindLabels:
		return "several labels"
	case rubrics.KindSpan:
		return "spans"
	}
	return kind
}

// RubricItems lists the items whose answers to a question gave a value:
// ?question=&value=.
func (h *Handlers) RubricItems(c echo.Context) error {
	q, err := queryParams(c, "question", "value")
	if err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, question, items, err := h.Rubrics.ItemsByAnswer(ctx(c), CallerOf(c).OrgID, id, q.Get("question"), q.Get("value"))
	if err != nil {
		return err
	}
	v := views.RubricItemsView{RubricID: r.ID.String(), Rubric: r.Name, Question: question.Title, Value: q.Get("value"),
		Limited: len(items) >= rubrics.MaxItemsByAnswer}
	for _, it := range items {
		v.Items = append(v.Items, views.RubricItemRow{URL: feedbackItemURL(it.ID.String(), ""), Query: it.Query, Status: it.Status,
			Created: views.When(it.CreatedAt), Answers: it.Answers})
	}
	return render(c, http.StatusOK, views.RubricItemsPage(h.page(c, r.Name, "queue"), v))
}

// blankQuestions is how many empty question cards the form adds.
const blankQuestions = 2

// RubricNew is the form for a new rubric.
func (h *Handlers) RubricNew(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	v := views.RubricFormView{IsAdmin: true}
	v.Questions = questionForms(nil, 4)
	return render(c, http.StatusOK, views.RubricFormPage(h.page(c, "Define a rubric", "queue"), v))
}

// RubricEdit is a rubric's form at its current version (read-only below
// admin).
func (h *Handlers) RubricEdit(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := h.Rubrics.Get(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	v := rubricFormView(r, CallerOf(c).Role.AtLeast(auth.Admin))
	v.CanExport = CallerOf(c).Role.AtLeast(auth.Curator)
	counts, truncated, err := h.Rubrics.Breakdown(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	v.Truncated = truncated
	for _, qc := range counts {
		if qc.Answered == 0 {
			continue
		}
		row := views.RubricBreakdownRow{Key: qc.Question.Key, Title: qc.Question.Title, Answered: qc.Answered}
		for _, vc := range qc.Counts {
			row.Counts = append(row.Counts, views.RubricCount{Label: vc.Value, N: vc.N,
				URL: "/rubrics/" + id.String() + "/items?" + url.Values{"question": {qc.Question.Key}, "value": {vc.Value}}.Encode()})
		}
		v.Breakdown = append(v.Breakdown, row)
	}
	return render(c, http.StatusOK, views.RubricFormPage(h.page(c, r.Name, "queue"), v))
}

func rubricFormView(r rubrics.Rubric, admin bool) views.RubricFormView {
	v := views.RubricFormView{ID: r.ID.String(), Version: r.Version, Name: r.Name, Guidelines: r.Guidelines,
		Tags: strings.Join(r.AppliesTo.Tags, ", "), Preview: rubrics.GuidelinesHTML(r.Guidelines), IsAdmin: admin}
	blank := 0
	if admin {
		blank = blankQuestions
	}
	v.Questions = questionForms(r.Questions, blank)
	return v
}

// questionForms are the questions as form cards, and blank more.
func questionForms(qs []rubrics.Question, blank int) []views.RubricQuestionForm {
	out := make([]views.RubricQuestionForm, 0, len(qs)+blank)
	for i, q := range qs {
		f := views.RubricQuestionForm{Index: i, Key: q.Key, Kind: q.Kind, Title: q.Title, Description: q.Description,
			Options: strings.Join(q.Options, "\n"), Level: q.Level, Required: q.Required}
		if q.Min != nil {
			f.Min = strconv.Itoa(*q.Min)
		}
		if q.Max != nil {
			f.Max = strconv.Itoa(*q.Max)
		}
		out = append(out, f)
	}
	for i := 0; i < blank && len(out) < rubrics.MaxQuestions; i++ {
		out = append(out, views.RubricQuestionForm{Index: len(out), Kind: rubrics.KindLabel})
	}
	return out
}

// rubricFromForm reads the rubric form: cards with no key are left out.
func rubricFromForm(c echo.Context) (rubrics.Input, []views.RubricQuestionForm, error) {
	form, err := c.FormParams()
	if err != nil {
		return rubrics.Input{}, nil, errs.InvalidField("name", "the form could not be read")
	}
	in := rubrics.Input{Name: form.Get("name"), Guidelines: form.Get("guidelines")}
	for _, t := range strings.Split(form.Get("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			in.AppliesTo.Tags = append(in.AppliesTo.Tags, t)
		}
	}
	v := &errs.Invalid{}
	var cards []views.RubricQuestionForm
	for i := 0; i < rubrics.MaxQuestions; i++ {
		p := "q" + strconv.Itoa(i) + "_"
		card := views.RubricQuestionForm{Index: i, Key: strings.TrimSpace(form.Get(p + "key")), Kind: form.Get(p + "kind"),
			Title: form.Get(p + "title"), Description: form.Get(p + "description"), Options: form.Get(p + "options"),
			Min: strings.TrimSpace(form.Get(p + "min")), Max: strings.TrimSpace(form.Get(p + "max")), Level: form.Get(p + "level"),
			Required: form.Get(p+"required") != ""}
		if !form.Has(p + "key") {
			break
		}
		if card.Key == "" {
			continue
		}
		card.Index = len(cards)
		cards = append(cards, card)
		q := rubrics.Question{Key: card.Key, Kind: card.Kind, Title: card.Title, Description: card.Description,
			Level: card.Level, Required: card.Required}
		for _, o := range strings.Split(strings.ReplaceAll(card.Options, "\r\n", "\n"), "\n") {
			if o = strings.TrimSpace(o); o != "" {
				q.Options = append(q.Options, o)
			}
		}
		at := fmt.Sprintf("questions[%d].", card.Index)
		if card.Min != "" {
			n, err := strconv.Atoi(card.Min)
			if err != nil {
				v.Add(at+"min", "must be a whole number")
			}
			q.Min = &n
		}
		if card.Max != "" {
			n, err := strconv.Atoi(card.Max)
			if err != nil {
				v.Add(at+"max", "must be a whole number")
			}
			q.Max = &n
		}
		if q.Kind != rubrics.KindRating && q.Kind != rubrics.KindLabels && q.Kind != rubrics.KindText {
			q.Min, q.Max = nil, nil
		}
		in.Questions = append(in.Questions, q)
	}
	return in, cards, v.Err()
}

// RubricCreate defines a rubric from the form.
func (h *Handlers) RubricCreate(c echo.Context) error {
	return h.saveRubric(c, uuid.Nil)
}

// RubricSave saves the form as the rubric's new version.
func (h *Handlers) RubricSave(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	return h.saveRubric(c, id)
}

func (h *Handlers) saveRubric(c echo.Context, id uuid.UUID) error {
	caller := CallerOf(c)
	in, cards, err := rubricFromForm(c)
	var r rubrics.Rubric
	if err == nil {
		if id == uuid.Nil {
			r, err = h.Rubrics.Create(ctx(c), actor(c), caller.OrgID, in)
		} else {
			r, err = h.Rubrics.Update(ctx(c), actor(c), caller.OrgID, id, in)
		}
	}
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		v := views.RubricFormView{Name: in.Name, Guidelines: in.Guidelines, Tags: strings.Join(in.AppliesTo.Tags, ", "),
			IsAdmin: true, Errors: invalid.ByField(), Questions: cards}
		if id != uuid.Nil {
			cur, err := h.Rubrics.Get(ctx(c), caller.OrgID, id)
			if err != nil {
				return err
			}
			v.ID, v.Version = cur.ID.String(), cur.Version
		}
		for i := 0; i < blankQuestions && len(v.Questions) < rubrics.MaxQuestions; i++ {
			v.Questions = append(v.Questions, views.RubricQuestionForm{Index: len(v.Questions), Kind: rubrics.KindLabel})
		}
		return render(c, http.StatusUnprocessableEntity, views.RubricFormPage(h.page(c, "Rubric", "queue"), v))
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", fmt.Sprintf("Rubric “%s” saved as version %d.", r.Name, r.Version))
	return redirect(c, "/rubrics/"+r.ID.String())
}

// typedAnswers are answers a curator sent that were refused, kept to show
// again with the problems.
type typedAnswers struct {
	rubricID uuid.UUID
	raw      map[string]json.RawMessage
	errors   map[string]string
	saved    uuid.UUID // the rubric whose answers were just saved
}

// FeedbackAnswersSave saves the curator's answers to a rubric from the
// item page.
func (h *Handlers) FeedbackAnswersSave(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	form, err := c.FormParams()
	if err != nil {
		return errs.InvalidField("rubric_id", "the form could not be read")
	}
	rubricID, err := uuid.Parse(form.Get("rubric_id"))
	if err != nil {
		return errs.InvalidField("rubric_id", "must be a rubric's id")
	}
	r, err := h.Rubrics.Get(ctx(c), caller.OrgID, rubricID)
	if err != nil {
		return err
	}
	raw := map[string]json.RawMessage{}
	for _, q := range r.Questions {
		vals, ok := form["a."+q.Key]
		if !ok {
			continue
		}
		raw[q.Key] = formAnswer(q, vals)
	}
	_, err = h.Rubrics.Answer(ctx(c), actor(c), caller.OrgID, id, rubricID, raw)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderItem(c, http.StatusUnprocessableEntity, id, feedbackItemState{
			answers: &typedAnswers{rubricID: rubricID, raw: raw, errors: invalid.ByField()}})
	}
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		_, queueQuery, err := itemQueue(c)
		if err != nil {
			return err
		}
		h.Sessions.Flash(c, "ok", "Answers saved.")
		return redirect(c, feedbackItemURL(id.String(), queueQuery))
	}
	return h.renderItem(c, http.StatusOK, id, feedbackItemState{answers: &typedAnswers{saved: rubricID}})
}

// formAnswer is a form's values for a question as the JSON the service
// checks.
func formAnswer(q rubrics.Question, vals []string) json.RawMessage {
	enc := func(v any) json.RawMessage {
		b, _ := json.Marshal(v)
		return b
	}
	first := ""
	if len(vals) > 0 {
		first = vals[0]
	}
	switch q.Kind {
	case rubrics.KindLabels, rubrics.KindRanking:
		return enc(vals)
	case rubrics.KindRating:
		if first == "" {
			return json.RawMessage("null")
		}
		if n, err := strconv.Atoi(first); err == nil {
			return enc(n)
		}
		return enc(first)
	case rubrics.KindSpan:
		if strings.TrimSpace(first) == "" {
			return json.RawMessage("null")
		}
		if json.Valid([]byte(first)) {
			return json.RawMessage(first)
		}
		return enc(first)
	}
	return enc(first)
}

// itemRubrics are the rubrics asked of an item, with the caller's answers
// (or those they just sent, refused) and the others' they may see.
func (h *Handlers) itemRubrics(c echo.Context, f feedback.Detail, typed *typedAnswers) ([]views.ItemRubricView, error) {
	caller := CallerOf(c)
	rs, err := h.Rubrics.ForTags(ctx(c), caller.OrgID, f.Feedback.Tags)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	answers, final, err := h.visibleAnswers(c, f.Feedback.ID)
	if err != nil {
		return nil, err
	}
	mine, _ := rubrics.ReviewerKey(actor(c))
	tokens := rubrics.Tokens(f.Feedback.Response)
	var out []views.ItemRubricView
	for _, r := range rs {
		v := views.ItemRubricView{ID: r.ID.String(), Name: r.Name, Version: r.Version, Guidelines: rubrics.GuidelinesHTML(r.Guidelines),
			CanAnswer: caller.Role.AtLeast(auth.Curator) && !final}
		var given map[string]json.RawMessage
		for _, a := range answers {
			if a.RubricID != r.ID {
				continue
			}
			if !a.Adjudicated && a.ReviewerKey == mine {
				_ = json.Unmarshal(a.Answers, &given)
				v.Answered = fmt.Sprintf("You answered version %d, %s.", a.RubricVersion, views.When(a.UpdatedAt))
				if final {
					v.Answered = fmt.Sprintf("You answered version %d, %s; your review is submitted, and your answers with it.", a.RubricVersion, views.When(a.UpdatedAt))
					v.Others = append(v.Others, answerLines(r, a))
				}
				continue
			}
			v.Others = append(v.Others, answerLines(r, a))
		}
		if typed != nil && typed.rubricID == r.ID {
			given, v.Errors = typed.raw, typed.errors
		}
		v.Saved = typed != nil && typed.saved == r.ID
		for _, q := range r.Questions {
			v.Questions = append(v.Questions, questionView(q, given[q.Key], tokens))
		}
		out = append(out, v)
	}
	return out, nil
}

// questionView is a question with an answer given (raw JSON, nil if none).
func questionView(q rubrics.Question, raw json.RawMessage, tokens []rubrics.Token) views.ItemQuestionView {
	v := views.ItemQuestionView{Key: q.Key, Kind: q.Kind, Title: q.Title, Description: q.Description, Required: q.Required}
	var s string
	var list []string
	_ = json.Unmarshal(raw, &s)
	_ = json.Unmarshal(raw, &list)
	numberKey := func(i int) string {
		if i < 9 {
			return strconv.Itoa(i + 1)
		}
		if i == 9 {
			return "0"
		}
		return ""
	}
	switch q.Kind {
	case rubrics.KindLabel, rubrics.KindLabels, rubrics.KindSpan:
		for i, o := range q.Options {
			v.Options = append(v.Options, views.ItemQuestionOption{Value: o, Label: o, Key: numberKey(i),
				Checked: o == s || containsString(list, o)})
		}
		if q.Kind == rubrics.KindSpan {
			if len(q.Options) == 0 {
				v.Options = []views.ItemQuestionOption{{Value: "span", Label: "mark", Key: "1"}}
			}
			v.SpansJSON = "[]"
			if len(raw) > 0 && string(raw) != "null" {
				v.SpansJSON = string(raw)
			}
			for i, t := range tokens {
				tok := views.ItemToken{Start: t.Start, End: t.End, Text: t.Text, Space: " "}
				if i == len(tokens)-1 {
					tok.Space = ""
				}
				v.Tokens = append(v.Tokens, tok)
			}
		}
	case rubrics.KindRating:
		var n float64
		given := json.Unmarshal(raw, &n) == nil
		lo, hi := q.Bounds()
		for x := lo; x <= hi; x++ {
			label := strconv.Itoa(x)
			if len(q.Options) == hi-lo+1 {
				label += " " + q.Options[x-lo]
			}
			v.Options = append(v.Options, views.ItemQuestionOption{Value: strconv.Itoa(x), Label: label, Key: numberKey(x - lo),
				Checked: given && int(n) == x})
		}
	case rubrics.KindRanking:
		for _, o := range q.Options {
			v.Options = append(v.Options, views.ItemQuestionOption{Value: o, Label: o})
		}
		v.Ranking = q.Options
		if len(list) == len(q.Options) {
			v.Ranking = list
		}
	case rubrics.KindText:
		v.Text = s
	}
	return v
}

// answerLines is an answer as lines of text, question by question.
func answerLines(r rubrics.Rubric, a rubrics.Answer) views.ItemRubricAnswer {
	out := views.ItemRubricAnswer{Reviewer: a.Reviewer, Version: a.RubricVersion, Adjudicated: a.Adjudicated}
	var vals map[string]json.RawMessage
	_ = json.Unmarshal(a.Answers, &vals)
	for _, q := range r.Questions {
		raw, ok := vals[q.Key]
		if !ok {
			continue
		}
		out.Lines = append(out.Lines, views.ItemRubricLine{Title: q.Title, Value: answerText(q, raw)})
	}
	return out
}

// answerText is one answer as a person reads it.
func answerText(q rubrics.Question, raw json.RawMessage) string {
	switch q.Kind {
	case rubrics.KindLabels, rubrics.KindRanking:
		var list []string
		if json.Unmarshal(raw, &list) == nil {
			sep := ", "
			if q.Kind == rubrics.KindRanking {
				sep = " > "
			}
			return strings.Join(list, sep)
		}
	case rubrics.KindSpan:
		var spans []rubrics.Span
		if json.Unmarshal(raw, &spans) == nil {
			parts := make([]string, len(spans))
			for i, s := range spans {
				parts[i] = fmt.Sprintf("%s %d–%d", s.Label, s.Start, s.End)
			}
			return strings.Join(parts, "; ")
		}
	case rubrics.KindLabel, rubrics.KindText:
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}
