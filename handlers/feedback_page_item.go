package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/hygiene"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/textdiff"
	"github.com/curate/curate/views"
)

// FeedbackItem shows one item: the conversation, its context, ratings,
// flags, history and, for curators, the review forms.
func (h *Handlers) FeedbackItem(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	return h.renderItem(c, http.StatusOK, id, feedbackItemState{})
}

// itemQueue reads the queue's filter and page that an item page carries in
// its query string, under the queue's own parameter names, so the item
// knows its place in the queue and the way back to it. A bad parameter is
// refused as the queue refuses it. query is the filter and page written
// back, for the item's links and forms.
func itemQueue(c echo.Context) (f feedback.Filter, query string, err error) {
	q := c.QueryParams()
	if f, err = queueFilter(c, q); err != nil {
		return f, "", err
	}
	cursor, err := keyset.Parse(feedback.ListName, q.Get("cursor"))
	if err != nil {
		return f, "", err
	}
	out := f.Values()
	if cursor != nil {
		out.Set("cursor", cursor.Encode(feedback.ListName))
	}
	return f, out.Encode(), nil
}

// feedbackItemState is what the last action left to show on the item.
type feedbackItemState struct {
	message  string
	conflict string
	yours    string // the correction the curator sent, kept on a conflict or error
	errors   map[string]string
	review   *views.ReviewLabelForm // a refused review, as typed
	answers  *typedAnswers          // rubric answers refused, or just saved
}

func (h *Handlers) renderItem(c echo.Context, status int, id uuid.UUID, st feedbackItemState) error {
	caller := CallerOf(c)
	f, queueQuery, err := itemQueue(c)
	if err != nil {
		return err
	}
	d, err := h.Feedback.Get(ctx(c), caller.OrgID, id)
	if err != nil {
		return err
	}
	users, err := h.Accounts.ListUsers(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	place, err := h.Feedback.Place(ctx(c), caller.OrgID, f, feedback.Key(d.Feedback))
	if err != nil {
		return err
	}
	built, err := h.Pairs.ByFeedback(ctx(c), caller.OrgID, id)
	if err != nil {
		return err
	}
	trained, err := h.Models.TrainedOn(ctx(c), caller.OrgID, id)
	if err != nil {
		return err
	}
	v := feedbackItemView(d, queueQuery)
	var reviewErrors map[string]string
	if st.review != nil {
		reviewErrors, st.errors = st.errors, nil
	}
	if v.Review, err = h.itemReview(c, id, st.review, reviewErrors); err != nil {
		return err
	}
	if v.Rubrics, err = h.itemRubrics(c, d, st.answers); err != nil {
		return err
	}
	v.Place = itemPlace(place, queueQuery)
	v.CSRF = CSRFToken(c)
	v.CanAct = caller.Role.AtLeast(auth.Curator)
	if v.CanAct && caller.UserID != uuid.Nil {
		if v.AutoAdvance, err = h.Feedback.AutoAdvance(ctx(c), caller.OrgID, caller.UserID); err != nil {
			return err
		}
	}
	v.Message = st.message
	v.Errors = st.errors
	for _, u := range users {
		// A viewer reviews nothing, so is nobody's assignee.
		if u.Active && u.Role != db.UserRoleViewer {
			v.Users = append(v.Users, views.QueueOption{Value: u.ID.String(), Label: u.Email})
		}
	}
	for _, m := range trained {
		v.Models = append(v.Models, views.ItemModel{URL: "/models/versions/" + m.VersionID.String(), Label: m.Name + " " + m.Version,
			Status: m.Status, Aliases: m.Aliases, DatasetURL: "/datasets/" + m.DatasetID.String(),
			DatasetLabel: fmt.Sprintf("%s v%d", m.DatasetName, m.DatasetNumber)})
	}
	for _, p := range built {
		side := "chosen"
		if p.RejectedFeedbackID.Valid && p.RejectedFeedbackID.UUID == id {
			side = "rejected"
		}
		v.Pairs = append(v.Pairs, views.ItemPair{URL: "/pairs/" + p.ID.String(), Query: p.QueryPreview, Side: side,
			Method: string(p.Method), When: views.When(p.CreatedAt)})
	}
	if st.yours != "" && st.conflict == "" {
		v.Draft = st.yours // a refused edit stays in the editor
	}
	if st.conflict != "" {
		v.Conflict = &views.ItemConflict{Message: st.conflict, Status: v.Status, Correction: v.Correction,
			Tags: strings.Join(v.Tags, ", "), Assignee: v.Assignee, Yours: st.yours, ReloadURL: v.URL}
	}
	if isHTMX(c) {
		return render(c, status, views.ItemFragment(v))
	}
	return render(c, status, views.ItemPage(h.page(c, "Feedback", "queue"), v))
}

// itemPlace shows an item's place in the queue's filter.
func itemPlace(p feedback.Place, queueQuery string) views.ItemPlace {
	out := views.ItemPlace{Position: p.Position, Total: p.Total}
	if p.Prev != uuid.Nil {
		out.PrevURL = feedbackItemURL(p.Prev.String(), queueQuery)
	}
	if p.Next != uuid.Nil {
		out.NextURL = feedbackItemURL(p.Next.String(), queueQuery)
	}
	return out
}

func feedbackItemView(d feedback.Detail, queueQuery string) views.ItemView {
	f := d.Feedback
	id := f.ID.String()
	back := "/feedback"
	if queueQuery != "" {
		back += "?" + queueQuery
	}
	v := views.ItemView{
		ID: id, Version: strconv.Itoa(int(f.Version)), URL: feedbackItemURL(id, queueQuery), BackURL: back, ActionQuery: withPrefix("?", queueQuery),
		Query: f.Query, Response: f.Response, Comment: f.Comment, Correction: f.Correction, Draft: f.Correction,
		Type: string(f.FeedbackType), Rating: smallIntText(f.Rating.Int16, f.Rating.Valid), Model: f.Model,
		ExperimentArm: f.ExperimentArm, Source: string(f.Source), Status: string(f.Status), Created: views.When(f.CreatedAt),
		SessionID: f.SessionID, TraceID: f.TraceID, ExternalID: f.ExternalID.String, EndUser: f.EndUserID,
		Tags: f.Tags, TagsText: strings.Join(f.Tags, ", "), PII: f.PiiKinds, Assignee: d.AssigneeEmail,
		Reviewer: d.ReviewerEmail, ReviewedAt: views.WhenPtr(f.ReviewedAt), GivenBy: d.GivenByEmail,
		Training: views.TrainingDataView{IsTrainingData: f.IsTrainingData, Flags: f.HygieneFlags, DecidedBy: f.TrainingSetBy},
	}
	if !f.IsTrainingData {
		v.Training.Why = hygiene.Why(f.HygieneFlags, f.TrainingSetBy)
	}
	if v.Draft == "" {
		v.Draft = f.Response // the editor starts from the answer given
	}
	if f.LatencyMs.Valid {
		v.Latency = strconv.Itoa(int(f.LatencyMs.Int32)) + " ms"
	}
	if f.AssigneeID.Valid {
		v.AssigneeID = f.AssigneeID.UUID.String()
	}
	if f.DuplicateOf.Valid {
		v.DuplicateOf = feedbackItemURL(f.DuplicateOf.UUID.String(), queueQuery)
	}
	for _, dim := range []struct {
		name string
		n    pgtype.Int2
	}{{"accuracy", f.DimAccuracy}, {"helpfulness", f.DimHelpfulness}, {"clarity", f.DimClarity}, {"safety", f.DimSafety}} {
		if dim.n.Valid {
			v.Dims = append(v.Dims, views.ItemDim{Name: dim.name, Value: strconv.Itoa(int(dim.n.Int16)) + "/5"})
		}
	}
	v.Documents, v.Messages, v.OtherContext = contextParts(f.Context)
	if f.Correction != "" {
		for _, op := range textdiff.Words(f.Response, f.Correction) {
			v.Diff = append(v.Diff, views.DiffOp{Kind: op.Kind.String(), Text: op.Text})
		}
	}
	for _, r := range d.History {
		row := views.ItemHistoryRow{When: views.When(r.CreatedAt), Actor: r.ActorLabel, Action: r.Action, Note: r.Note}
		if r.FromStatus.Valid {
			row.From = string(r.FromStatus.ReviewStatus)
		}
		if r.ToStatus.Valid {
			row.To = string(r.ToStatus.ReviewStatus)
		}
		v.History = append(v.History, row)
	}
	return v
}

// contextParts lays out the item's context object: RAG documents and
// earlier messages get their own sections, anything else is shown as JSON.
// Documents may be plain strings or objects with a title, a source and a
// content (or text, or page_content) field; the shapes RAG frameworks use.
func contextParts(raw []byte) (docs []views.ItemContextDoc, msgs []views.ItemMessage, other string) {
	var obj map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &obj) != nil {
		return nil, nil, ""
	}
	if rawDocs, ok := obj["documents"]; ok {
		var items []json.RawMessage
		if json.Unmarshal(rawDocs, &items) == nil {
			for _, it := range items {
				docs = append(docs, contextDoc(it))
			}
			delete(obj, "documents")
		}
	}
	if rawMsgs, ok := obj["messages"]; ok {
		var items []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(rawMsgs, &items) == nil {
			for _, m := range items {
				msgs = append(msgs, views.ItemMessage{Role: m.Role, Content: contextText(m.Content)})
			}
			delete(obj, "messages")
		}
	}
	if len(obj) > 0 {
		b, err := json.MarshalIndent(obj, "", "  ")
		if err == nil {
			other = string(b)
		}
	}
	return docs, msgs, other
}

func contextDoc(raw json.RawMessage) views.ItemContextDoc {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return views.ItemContextDoc{Text: s}
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return views.ItemContextDoc{Text: string(raw)}
	}
	first := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := m[k]; ok {
				if t := contextText(v); t != "" {
					return t
				}
			}
		}
		return ""
	}
	return views.ItemContextDoc{Title: first("title", "name", "id"), Source: first("source", "url", "uri"),
		Text: first("content", "text", "page_content", "snippet")}
}

// jsonText is a JSON string's value, or the JSON itself for anything else.
func contextText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func queueDimsSummary(acc, help, clar, safe pgtype.Int2) string {
	var parts []string
	for _, d := range []struct {
		name string
		n    pgtype.Int2
	}{{"acc", acc}, {"help", help}, {"clar", clar}, {"safe", safe}} {
		if d.n.Valid {
			parts = append(parts, fmt.Sprintf("%s %d", d.name, d.n.Int16))
		}
	}
	return strings.Join(parts, " · ")
}

// FeedbackStatus approves, rejects, marks for correction or reopens an item.
func (h *Handlers) FeedbackStatus(c echo.Context) error {
	// The body's fields, not the URL's: the URL carries the queue's filter,
	// which has a status and an assignee of its own.
	status := c.Request().PostFormValue("status")
	labels := map[string]string{"approved": "Approved.", "rejected": "Rejected.", "needs_correction": "Marked as needing a correction.",
		"corrected": "Marked as corrected.", "pending": "Back to pending."}
	return h.itemChange(c, feedback.Change{Status: &status}, labels[status], "")
}

// FeedbackCorrection saves the golden response; the item becomes corrected.
func (h *Handlers) FeedbackCorrection(c echo.Context) error {
	text := strings.ReplaceAll(c.Request().PostFormValue("correction"), "\r\n", "\n")
	if strings.TrimSpace(text) == "" {
		return h.itemInvalid(c, map[string]string{"correction": "write the answer the assistant should have given"}, text)
	}
	return h.itemChange(c, feedback.Change{Correction: &text}, "Correction saved; the item is corrected.", text)
}

// FeedbackTags replaces the item's tags with a comma-separated list.
func (h *Handlers) FeedbackTags(c echo.Context) error {
	tags := []string{}
	for _, t := range strings.Split(c.Request().PostFormValue("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return h.itemChange(c, feedback.Change{Tags: &tags}, "Tags saved.", "")
}

// FeedbackNote adds a note to the item's history.
func (h *Handlers) FeedbackNote(c echo.Context) error {
	note := strings.TrimSpace(c.Request().PostFormValue("note"))
	if note == "" {
		return h.itemInvalid(c, map[string]string{"note": "write a note first"}, "")
	}
	return h.itemChange(c, feedback.Change{Note: note}, "Note added.", "")
}

// FeedbackAssign gives the item to a curator, or to nobody.
func (h *Handlers) FeedbackAssign(c echo.Context) error {
	assignee := uuid.Nil
	if raw := c.Request().PostFormValue("assignee"); raw != "" {
		id, err := uuid.Parse(raw)
		if err != nil {
			return h.itemInvalid(c, map[string]string{"assignee": "is not a user id"}, "")
		}
		assignee = id
	}
	msg := "Unassigned."
	if assignee != uuid.Nil {
		msg = "Assigned."
	}
	return h.itemChange(c, feedback.Change{Assignee: &assignee}, msg, "")
}

// itemChange applies one review change at the version the form was loaded
// with. A stale version answers 409 with the item as it is now, in place of
// the form; bad input answers 422 with the message beside its field. With
// auto-advance on, a review (approve, reject, needs correction, a saved
// correction) goes on to the next item of the queue's filter, or back to
// the queue when the filter has no more.
func (h *Handlers) itemChange(c echo.Context, ch feedback.Change, done, yours string) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	f, queueQuery, err := itemQueue(c)
	if err != nil {
		return err
	}
	version, err := strconv.Atoi(c.Request().PostFormValue("version"))
	if err != nil || version < 1 {
		return errs.InvalidField("version", "is missing: reload the item and try again")
	}
	caller := CallerOf(c)
	saved, err := h.Feedback.Update(ctx(c), actor(c), caller.OrgID, id, int32(version), ch)
	var (
		conflict *errs.Conflict
		invalid  *errs.Invalid
	)
	switch {
	case errors.As(err, &conflict):
		return h.renderItem(c, http.StatusConflict, id, feedbackItemState{conflict: conflict.Message, yours: yours})
	case errors.As(err, &invalid):
		return h.renderItem(c, http.StatusUnprocessableEntity, id, feedbackItemState{errors: invalid.ByField(), yours: yours})
	case err != nil:
		return err
	}
	if c.Request().PostFormValue("return") == "queue" {
		h.Sessions.Flash(c, "ok", done)
		return redirect(c, "/feedback"+withPrefix("?", queueQuery))
	}
	if isReview(ch) && caller.UserID != uuid.Nil {
		on, err := h.Feedback.AutoAdvance(ctx(c), caller.OrgID, caller.UserID)
		if err != nil {
			return err
		}
		if on {
			next, err := h.Feedback.Next(ctx(c), caller.OrgID, f, feedback.Key(saved))
			if err != nil {
				return err
			}
			if next == uuid.Nil {
				h.Sessions.Flash(c, "ok", done+" That was the last item in this filter: the filter is done.")
				return redirect(c, feedbackQueueURL(f.Values()))
			}
			h.Sessions.Flash(c, "ok", done)
			return redirect(c, feedbackItemURL(next.String(), queueQuery))
		}
	}
	if isHTMX(c) {
		return h.renderItem(c, http.StatusOK, id, feedbackItemState{message: done})
	}
	h.Sessions.Flash(c, "ok", done)
	return redirect(c, feedbackItemURL(id.String(), queueQuery))
}

// isReview reports whether a change is a review verdict, the actions
// auto-advance follows: reopening, tags, notes and assignment stay on the
// item.
func isReview(ch feedback.Change) bool {
	if ch.Correction != nil {
		return true
	}
	return ch.Status != nil && (*ch.Status == "approved" || *ch.Status == "rejected" || *ch.Status == "needs_correction")
}

// FeedbackAutoAdvance turns the curator's auto-advance on or off and shows
// the item again.
func (h *Handlers) FeedbackAutoAdvance(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	_, queueQuery, err := itemQueue(c)
	if err != nil {
		return err
	}
	var on bool
	switch c.Request().PostFormValue("auto_advance") {
	case "on":
		on = true
	case "off":
	default:
		return errs.InvalidField("auto_advance", "must be on or off")
	}
	caller := CallerOf(c)
	if err := h.Feedback.SetAutoAdvance(ctx(c), caller.OrgID, caller.UserID, id, on); err != nil {
		return err
	}
	msg := "Auto-advance is off: a review stays on the item."
	if on {
		msg = "Auto-advance is on: a review opens the next item."
	}
	if isHTMX(c) {
		return h.renderItem(c, http.StatusOK, id, feedbackItemState{message: msg})
	}
	h.Sessions.Flash(c, "ok", msg)
	return redirect(c, feedbackItemURL(id.String(), queueQuery))
}

// FeedbackDiff is the word diff of a correction being typed against the
// item's response, for the editor's live preview. A refused text is said
// in the preview's place.
func (h *Handlers) FeedbackDiff(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	text := strings.ReplaceAll(c.Request().PostFormValue("correction"), "\r\n", "\n")
	if strings.TrimSpace(text) == "" {
		return render(c, http.StatusOK, views.LiveDiff(views.LiveDiffView{}))
	}
	ops, err := h.Feedback.Diff(ctx(c), CallerOf(c).OrgID, id, text)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return render(c, http.StatusOK, views.LiveDiff(views.LiveDiffView{Error: invalid.ByField()["correction"]}))
	}
	if err != nil {
		return err
	}
	v := views.LiveDiffView{Shown: true}
	for _, op := range ops {
		v.Ops = append(v.Ops, views.DiffOp{Kind: op.Kind.String(), Text: op.Text})
	}
	return render(c, http.StatusOK, views.LiveDiff(v))
}

func (h *Handlers) itemInvalid(c echo.Context, fieldErrs map[string]string, yours string) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	return h.renderItem(c, http.StatusUnprocessableEntity, id, feedbackItemState{errors: fieldErrs, yours: yours})
}

func withPrefix(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
