package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/textdiff"
	"github.com/curate/curate/views"
)

// PairList lists the organisation's preference pairs.
func (h *Handlers) PairList(c echo.Context) error {
	q := c.QueryParams()
	f, err := pairs.ParseFilter(q.Get)
	if err != nil {
		return err
	}
	cursor, err := keyset.Parse(pairs.ListName, q.Get("cursor"))
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	page, err := h.Pairs.List(ctx(c), caller.OrgID, f, cursor, 50)
	if err != nil {
		return err
	}
	counts, err := h.Pairs.MethodCounts(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	v := views.PairListView{Method: f.Method, Tag: f.Tag, Q: f.Q, Methods: pairs.Methods, CanEdit: caller.Role.AtLeast(auth.Curator)}
	if v.CanEdit {
		open, err := h.Datasets.Open(ctx(c), caller.OrgID, datasets.KindPreference)
		if err != nil {
			return err
		}
		v.Datasets, v.ListQuery = datasetChoices(open), q.Encode()
		v.NewDataset = views.NewDatasetChoice{Types: datasets.TypesFor(datasets.KindPreference)}
	}
	for _, n := range counts {
		v.Counts = append(v.Counts, views.PairCount{Method: string(n.Method), Count: strconv.FormatInt(n.Count, 10)})
	}
	for _, r := range page.Rows {
		v.Rows = append(v.Rows, views.PairRow{ID: r.ID.String(), URL: "/pairs/" + r.ID.String(), Query: r.QueryPreview, Chosen: r.ChosenPreview,
			Rejected: r.RejectedPreview, Strength: strengthText(pairs.Strength(r.PreferenceStrength)), Method: string(r.Method),
			Tags: r.Tags, Created: views.When(r.CreatedAt)})
	}
	if page.Next != nil {
		next := url.Values{}
		for k, vals := range q {
			next[k] = vals
		}
		next.Set("cursor", page.Next.Encode(pairs.ListName))
		v.NextURL = "/pairs?" + next.Encode()
	}
	return render(c, http.StatusOK, views.PairListPage(h.page(c, "Preference pairs", "pairs"), v))
}

// PairNew shows an empty editor, or one prefilled from ?feedback=ID.
func (h *Handlers) PairNew(c echo.Context) error {
	in := pairs.Input{Method: "manual"}
	if s := c.QueryParam("feedback"); s != "" {
		id, err := uuid.Parse(s)
		if err != nil {
			return errs.ErrNotFound
		}
		if in, err = h.Pairs.FromFeedback(ctx(c), CallerOf(c).OrgID, id); err != nil {
			return err
		}
	}
	one := 1.0
	in.Strength = &one
	return h.renderEditor(c, http.StatusOK, "", "", in, editorState{})
}

// PairCreate saves a new pair from the editor's form; the "swap" button
// shows the form again with the replies exchanged.
func (h *Handlers) PairCreate(c echo.Context) error {
	in, formErr := pairForm(c)
	if c.FormValue("action") == "swap" {
		swapInput(&in)
		return h.renderEditor(c, http.StatusOK, "", "", in, editorState{})
	}
	if formErr != nil {
		return h.renderEditor(c, http.StatusUnprocessableEntity, "", "", in, editorState{errors: formErr.ByField()})
	}
	p, err := h.Pairs.Create(ctx(c), actor(c), CallerOf(c).OrgID, in)
	if err != nil {
		return h.editorError(c, "", "", in, err)
	}
	h.Sessions.Flash(c, "ok", "Pair saved.")
	return redirect(c, "/pairs/"+p.ID.String())
}

// PairEdit shows a stored pair in the editor.
func (h *Handlers) PairEdit(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	d, err := h.Pairs.Get(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	in := pairInput(d)
	return h.renderEditor(c, http.StatusOK, id.String(), strconv.Itoa(int(d.Version)), in,
		editorState{annotator: d.AnnotatorEmail, created: views.When(d.CreatedAt)})
}

// PairSave saves the editor's changes to a stored pair, if nobody changed
// it since the form was loaded.
func (h *Handlers) PairSave(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	in, formErr := pairForm(c)
	version := c.FormValue("version")
	if c.FormValue("action") == "swap" {
		swapInput(&in)
		return h.renderEditor(c, http.StatusOK, id.String(), version, in, editorState{})
	}
	if formErr != nil {
		return h.renderEditor(c, http.StatusUnprocessableEntity, id.String(), version, in, editorState{errors: formErr.ByField()})
	}
	n, _ := strconv.Atoi(version)
	ch := pairs.Change{Query: &in.Query, Chosen: &in.Chosen, Rejected: &in.Rejected, Strength: in.Strength, Notes: &in.Notes, Tags: &in.Tags}
	cur, err := h.Pairs.Get(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	if feedbackLinksSwapped(c, cur.ChosenFeedbackID.UUID, cur.RejectedFeedbackID.UUID) {
		// The page swapped the replies: swap the stored links with them.
		// Swap applies after the edits, so the texts go in exchanged.
		ch.Swap, ch.Chosen, ch.Rejected = true, &in.Rejected, &in.Chosen
	}
	p, err := h.Pairs.Update(ctx(c), actor(c), CallerOf(c).OrgID, id, int32(n), ch)
	if err != nil {
		return h.editorError(c, id.String(), version, in, err)
	}
	h.Sessions.Flash(c, "ok", "Pair saved.")
	return redirect(c, "/pairs/"+p.ID.String())
}

// feedbackLinksSwapped reports whether the form's feedback links are the
// stored ones exchanged (the page swapped chosen and rejected).
func feedbackLinksSwapped(c echo.Context, chosen, rejected uuid.UUID) bool {
	fc, fr := c.FormValue("chosen_feedback_id"), c.FormValue("rejected_feedback_id")
	return chosen != rejected && fc != "" && fc == rejected.String() && fr == chosen.String()
}

// PairDelete deletes a pair from its editor.
func (h *Handlers) PairDelete(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(c.FormValue("version"))
	if err := h.Pairs.Delete(ctx(c), actor(c), CallerOf(c).OrgID, id, int32(n)); err != nil {
		var conflict *errs.Conflict
		if errors.As(err, &conflict) {
			h.Sessions.Flash(c, "error", conflict.Message)
			return redirect(c, "/pairs/"+id.String())
		}
		return err
	}
	h.Sessions.Flash(c, "ok", "Pair deleted.")
	return redirect(c, "/pairs")
}

type editorState struct {
	errors      map[string]string
	conflict    string
	conflictURL string
	annotator   string
	created     string
}

func (h *Handlers) editorError(c echo.Context, id, version string, in pairs.Input, err error) error {
	var invalid *errs.Invalid
	var conflict *errs.Conflict
	switch {
	case errors.As(err, &invalid):
		return h.renderEditor(c, http.StatusUnprocessableEntity, id, version, in, editorState{errors: invalid.ByField()})
	case errors.As(err, &conflict):
		st := editorState{conflict: conflict.Message}
		if cur, ok := conflict.Current.(db.PreferencePair); ok {
			st.conflictURL = "/pairs/" + cur.ID.String()
		}
		return h.renderEditor(c, http.StatusConflict, id, version, in, st)
	}
	return err
}

func (h *Handlers) renderEditor(c echo.Context, status int, id, version string, in pairs.Input, st editorState) error {
	v := views.PairEditorView{CSRF: CSRFToken(c), ID: id, Action: "/pairs", Version: version, Query: in.Query,
		Chosen: in.Chosen, Rejected: in.Rejected, Notes: in.Notes, Tags: strings.Join(in.Tags, ", "), Method: in.Method,
		ContextJSON: string(in.ContextDocuments), Errors: st.errors, Conflict: st.conflict, ConflictURL: st.conflictURL,
		CanEdit: CallerOf(c).Role.AtLeast(auth.Curator), Annotator: st.annotator, Created: st.created, Strength: "1"}
	if id != "" {
		v.Action = "/pairs/" + id
	}
	if in.Strength != nil {
		v.Strength = strengthText(*in.Strength)
	}
	if in.ChosenFeedbackID != nil {
		v.ChosenFeedbackID = in.ChosenFeedbackID.String()
	}
	if in.RejectedFeedbackID != nil {
		v.RejectedFeedbackID = in.RejectedFeedbackID.String()
	}
	if v.ContextJSON == "" {
		v.ContextJSON = "[]"
	}
	v.Docs, _, _ = contextParts([]byte(`{"documents":` + v.ContextJSON + `}`))
	for _, op := range textdiff.Words(in.Rejected, in.Chosen) {
		v.Diff = append(v.Diff, views.DiffOp{Kind: op.Kind.String(), Text: op.Text})
	}
	title := "New pair"
	if id != "" {
		title = "Pair"
	}
	return render(c, status, views.PairEditorPage(h.page(c, title, "pairs"), v))
}

// pairForm reads the editor's fields; the returned Invalid holds what could
// not be parsed (the store validates the rest).
func pairForm(c echo.Context) (pairs.Input, *errs.Invalid) {
	v := &errs.Invalid{}
	in := pairs.Input{Query: c.FormValue("query"), Chosen: c.FormValue("chosen_response"),
		Rejected: c.FormValue("rejected_response"), Notes: c.FormValue("annotation_notes"), Method: c.FormValue("method"),
		ContextDocuments: json.RawMessage(c.FormValue("context_documents"))}
	if in.Method != "correction" {
		in.Method = "manual"
	}
	if s := strings.TrimSpace(c.FormValue("preference_strength")); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			v.Add("preference_strength", "must be a number from 0 to 1")
		}
		in.Strength = &f
	}
	for _, t := range strings.Split(c.FormValue("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			in.Tags = append(in.Tags, t)
		}
	}
	for name, dst := range map[string]**uuid.UUID{"chosen_feedback_id": &in.ChosenFeedbackID, "rejected_feedback_id": &in.RejectedFeedbackID} {
		if s := c.FormValue(name); s != "" {
			id, err := uuid.Parse(s)
			if err != nil {
				v.Add(name, "is not a feedback item id")
				continue
			}
			*dst = &id
		}
	}
	if v.Has() {
		return in, v
	}
	return in, nil
}

func swapInput(in *pairs.Input) {
	in.Chosen, in.Rejected = in.Rejected, in.Chosen
	in.ChosenFeedbackID, in.RejectedFeedbackID = in.RejectedFeedbackID, in.ChosenFeedbackID
}

func pairInput(d pairs.Detail) pairs.Input {
	st := pairs.Strength(d.PreferenceStrength)
	in := pairs.Input{Query: d.Query, Chosen: d.ChosenResponse, Rejected: d.RejectedResponse, Strength: &st,
		Notes: d.AnnotationNotes, Tags: d.Tags, Method: string(d.Method), ContextDocuments: d.ContextDocuments}
	if d.ChosenFeedbackID.Valid {
		in.ChosenFeedbackID = &d.ChosenFeedbackID.UUID
	}
	if d.RejectedFeedbackID.Valid {
		in.RejectedFeedbackID = &d.RejectedFeedbackID.UUID
	}
	return in
}

func strengthText(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// PairRank shows the answers stored for ?query= to be ranked.
func (h *Handlers) PairRank(c echo.Context) error {
	return h.renderRank(c, http.StatusOK, c.QueryParam("query"), nil, nil)
}

// PairRankQueries suggests queries to rank while ?query= is being typed.
func (h *Handlers) PairRankQueries(c echo.Context) error {
	found, err := h.Pairs.RankQueries(ctx(c), CallerOf(c).OrgID, c.QueryParam("query"))
	if err != nil {
		return err
	}
	qs := make([]views.RankQuery, len(found))
	for i, q := range found {
		qs[i] = views.RankQuery{Query: q.Query, Answers: q.Answers}
	}
	return render(c, http.StatusOK, views.RankQueryList(qs))
}

// PairRankSave stores the pairs a ranking implies.
func (h *Handlers) PairRankSave(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	query := form.Get("query")
	type placed struct {
		id  uuid.UUID
		pos int
	}
	var ranked []placed
	positions := map[string]string{}
	for k, vals := range form {
		idText, ok := strings.CutPrefix(k, "rank_")
		if !ok || len(vals) == 0 || vals[0] == "" {
			continue
		}
		id, err1 := uuid.Parse(idText)
		pos, err2 := strconv.Atoi(vals[0])
		if err1 != nil || err2 != nil {
			return errs.InvalidField("order", "a place is not a number")
		}
		positions[idText] = vals[0]
		ranked = append(ranked, placed{id, pos})
	}
	sort.Slice(ranked, func(i, j int) bool { return ranked[i].pos < ranked[j].pos })
	r := pairs.Ranking{Query: query}
	for i, p := range ranked {
		if i > 0 && ranked[i-1].pos == p.pos {
			return h.renderRank(c, http.StatusUnprocessableEntity, query, positions, map[string]string{"order": "two answers share place " + strconv.Itoa(p.pos)})
		}
		r.Order = append(r.Order, p.id)
	}
	for _, t := range strings.Split(form.Get("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			r.Tags = append(r.Tags, t)
		}
	}
	res, err := h.Pairs.SaveRanking(ctx(c), actor(c), CallerOf(c).OrgID, r)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderRank(c, http.StatusUnprocessableEntity, query, positions, invalid.ByField())
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Ranking saved: "+views.Count(res.Created, "pair", "pairs")+" created, "+strconv.Itoa(res.Skipped)+" already stored.")
	return redirect(c, "/pairs?method=ranking")
}

func (h *Handlers) renderRank(c echo.Context, status int, query string, positions, errors map[string]string) error {
	v := views.PairRankView{CSRF: CSRFToken(c), Query: query, Errors: errors, CanEdit: CallerOf(c).Role.AtLeast(auth.Curator)}
	if strings.TrimSpace(query) != "" {
		cands, err := h.Pairs.Candidates(ctx(c), CallerOf(c).OrgID, query)
		if err != nil {
			return err
		}
		for i, cd := range cands {
			rc := views.PairRankCandidate{ID: cd.FeedbackID.String(), Response: cd.Response, Model: cd.Model,
				Position: positions[cd.FeedbackID.String()]}
			if cd.Rating != nil {
				rc.Rating = strconv.Itoa(*cd.Rating) + "/5"
			} else {
				rc.Rating = views.Label(cd.Type)
			}
			v.Candidates = append(v.Candidates, rc)
			v.Positions = append(v.Positions, strconv.Itoa(i+1))
		}
	}
	return render(c, status, views.PairRankPage(h.page(c, "Rank answers", "pairs"), v))
}

// PairGenerate shows the generation form and, with ?preview=1, what the
// chosen method would create.
func (h *Handlers) PairGenerate(c echo.Context) error {
	g, v := generationForm(c)
	v.CSRF = CSRFToken(c)
	v.CanEdit = CallerOf(c).Role.AtLeast(auth.Curator)
	status := http.StatusOK
	if c.QueryParam("preview") == "1" && v.Errors == nil {
		p, err := h.Pairs.Preview(ctx(c), CallerOf(c).OrgID, g)
		var invalid *errs.Invalid
		switch {
		case errors.As(err, &invalid):
			v.Errors, status = invalid.ByField(), http.StatusUnprocessableEntity
		case err != nil:
			return err
		default:
			pv := &views.PairPreviewView{Candidates: p.Candidates, Existing: p.Existing, New: p.New, AgreedOnly: p.AgreedOnly, LeftOut: p.LeftOut}
			for _, s := range p.Samples {
				pv.Samples = append(pv.Samples, views.PairSampleView{Query: s.Query, Chosen: s.Chosen, Rejected: s.Rejected, Strength: strengthText(s.Strength)})
			}
			v.Preview = pv
		}
	}
	return render(c, status, views.PairGeneratePage(h.page(c, "Generate pairs", "pairs"), v))
}

// PairGenerateConfirm creates the pairs the previewed generation finds.
func (h *Handlers) PairGenerateConfirm(c echo.Context) error {
	g, v := generationForm(c)
	if v.Errors != nil {
		bad := &errs.Invalid{}
		for _, f := range []string{"min_gap", "weights", "per_query", "agreed_only"} {
			if msg, ok := v.Errors[f]; ok {
				bad.Add(f, "%s", msg)
			}
		}
		return bad
	}
	res, err := h.Pairs.Generate(ctx(c), actor(c), CallerOf(c).OrgID, g)
	if err != nil {
		return err
	}
	msg := views.Count(res.Created, "pair", "pairs") + " created, " + strconv.Itoa(res.Skipped) + " already stored."
	if res.LeftOut > 0 {
		msg += " " + views.Count(res.LeftOut, "pair", "pairs") + " left out: their items are under open or disputed overlapping review."
	}
	h.Sessions.Flash(c, "ok", msg)
	return redirect(c, "/pairs?method="+url.QueryEscape(g.Method))
}

// generationForm reads the generation settings from a query or a form.
func generationForm(c echo.Context) (pairs.Generation, views.PairGenerateView) {
	d := pairs.DefaultWeights
	v := views.PairGenerateView{Method: c.FormValue("method"), MinGap: c.FormValue("min_gap"), PerQuery: c.FormValue("per_query"),
		Tags: c.FormValue("tags"), WAccuracy: c.FormValue("w_accuracy"), WHelpfulness: c.FormValue("w_helpfulness"),
		WClarity: c.FormValue("w_clarity"), WSafety: c.FormValue("w_safety"), AgreedOnly: c.FormValue("agreed_only"),
		Methods: []views.PairMethodOption{
			{Value: "same_query", Label: "Same query: the better-rated answer wins by at least the gap"},
			{Value: "threshold", Label: "Threshold: good (4–5 or thumbs up) against bad (1–2 or thumbs down) on the same query"},
			{Value: "multi_aspect", Label: "Multi-aspect: the weighted score of the four dimensions decides"},
			{Value: "correction", Label: "Corrections: every corrected item, correction over the original"},
		}}
	if v.Method == "" {
		v.Method = "same_query"
	}
	for _, f := range []struct {
		dst *string
		def float64
	}{{&v.WAccuracy, d.Accuracy}, {&v.WHelpfulness, d.Helpfulness}, {&v.WClarity, d.Clarity}, {&v.WSafety, d.Safety}} {
		if *f.dst == "" {
			*f.dst = strengthText(f.def)
		}
	}
	if v.PerQuery == "" {
		v.PerQuery = strconv.Itoa(pairs.DefaultPerQuery)
	}
	g := pairs.Generation{Method: v.Method, Weights: &pairs.Weights{}}
	bad := map[string]string{}
	num := func(name, s string, dst *float64) {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			bad[name] = "must be a number"
		}
		*dst = f
	}
	if v.MinGap != "" {
		g.MinGap = new(float64)
		num("min_gap", v.MinGap, g.MinGap)
	}
	num("weights", v.WAccuracy, &g.Weights.Accuracy)
	num("weights", v.WHelpfulness, &g.Weights.Helpfulness)
	num("weights", v.WClarity, &g.Weights.Clarity)
	num("weights", v.WSafety, &g.Weights.Safety)
	if n, err := strconv.Atoi(strings.TrimSpace(v.PerQuery)); err != nil {
		bad["per_query"] = "must be a whole number"
	} else {
		g.PerQuery = &n
	}
	for _, t := range strings.Split(v.Tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			g.Tags = append(g.Tags, t)
		}
	}
	switch v.AgreedOnly {
	case "":
	case "1", "0":
		on := v.AgreedOnly == "1"
		g.AgreedOnly = &on
	default:
		bad["agreed_only"] = "must be 1, 0 or empty"
	}
	if len(bad) > 0 {
		v.Errors = bad
	}
	return g, v
}
