package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
)

// APIFeedbackCreate stores one item: 201 with it, or 200 with the stored
// one when its external_id was already stored.
func (h *Handlers) APIFeedbackCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in feedback.Incoming
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	v := &errs.Invalid{}
	it := incoming(c, v, in, "")
	if v.Has() {
		return v
	}
	caller := CallerOf(c)
	if it.UserID != "" {
		// The per-end-user limit protects the queue from one user's flood.
		if ok, wait := h.UserLimiter.Allow(caller.OrgID.String() + "\x00" + it.UserID); !ok {
			return &errs.TooMany{Message: fmt.Sprintf("user %q sent too much feedback; try again in %ds", it.UserID, int(wait.Seconds())+1), RetryAfter: wait}
		}
	}
	f, created, err := h.Feedback.Ingest(ctx(c), caller.OrgID, "api", it)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	setETag(c, f.Version)
	return c.JSON(status, feedback.ToObject(f))
}

// APIFeedbackBatch stores up to 10,000 items with COPY, all or nothing.
func (h *Handlers) APIFeedbackBatch(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	body, err := readJSONBody(c)
	if err != nil {
		return err
	}
	var batch struct {
		Items []feedback.Incoming `json:"items"`
	}
	if err := strictUnmarshal(body, &batch); err != nil {
		// Decode again item by item, only to name the bad item's index.
		return batchDecodeError(body, err)
	}
	items := make([]feedback.Item, len(batch.Items))
	v := &errs.Invalid{}
	for i, in := range batch.Items {
		items[i] = incoming(c, v, in, fmt.Sprintf("items[%d].", i))
	}
	if v.Has() {
		return v
	}
	res, err := h.Feedback.IngestBatch(ctx(c), CallerOf(c).OrgID, "api", items)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// APIFeedbackList lists the queue with the page's filters and a cursor,
// each item whole as GET /api/feedback/:id shows it (without its history);
// preview=1 cuts the long texts.
func (h *Handlers) APIFeedbackList(c echo.Context) error {
	q, err := queryParams(c, slices.Concat(feedback.FilterParams, pageParams, []string{"preview"})...)
	if err != nil {
		return err
	}
	f, err := queueFilter(c, q)
	if err != nil {
		return err
	}
	limit, cursor, err := listPage(q, cursorIn(feedback.ListName))
	if err != nil {
		return err
	}
	short, err := wantPreview(q)
	if err != nil {
		return err
	}
	items, next, err := h.Feedback.ListObjects(ctx(c), CallerOf(c).OrgID, f, cursor, limit)
	if err != nil {
		return err
	}
	if short {
		for i := range items {
			o := &items[i]
			o.Query, o.Response, o.Comment, o.Correction = preview(o.Query), preview(o.Response), preview(o.Comment), preview(o.Correction)
		}
	}
	return listJSON(c, feedback.ListName, items, next)
}

// APIFeedbackGet returns one item with its review history.
func (h *Handlers) APIFeedbackGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	d, err := h.Feedback.Get(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	type event struct {
		At     time.Time `json:"at"`
		Actor  string    `json:"actor"`
		Action string    `json:"action"`
		From   string    `json:"from,omitempty"`
		To     string    `json:"to,omitempty"`
		Note   string    `json:"note,omitempty"`
	}
	out := struct {
		feedback.Object
		History []event `json:"history"`
	}{Object: feedback.ToObject(d.Feedback), History: []event{}}
	for _, r := range d.History {
		out.History = append(out.History, event{At: r.CreatedAt, Actor: r.ActorLabel, Action: r.Action,
			From: string(r.FromStatus.ReviewStatus), To: string(r.ToStatus.ReviewStatus), Note: r.Note})
	}
	setETag(c, d.Feedback.Version)
	return c.JSON(http.StatusOK, out)
}

// APIFeedbackPatch changes status, tags, correction or assignee. If-Match
// must carry the version the caller saw; a stale one answers 409 with the
// current item.
func (h *Handlers) APIFeedbackPatch(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	version, err := ifMatch(c)
	if err != nil {
		return err
	}
	var body struct {
		Status     *string          `json:"status"`
		Tags       *[]string        `json:"tags"`
		Correction *string          `json:"correction"`
		Assignee   *json.RawMessage `json:"assignee_id"`
		Note       string           `json:"note"`
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	ch := feedback.Change{Status: body.Status, Tags: body.Tags, Correction: body.Correction, Note: body.Note}
	if body.Assignee != nil {
		var s *string
		if err := json.Unmarshal(*body.Assignee, &s); err != nil {
			return errs.InvalidField("assignee_id", "must be a user id or null")
		}
		a := uuid.Nil
		if s != nil {
			if a, err = uuid.Parse(*s); err != nil {
				return errs.InvalidField("assignee_id", "must be a user id or null")
			}
		}
		ch.Assignee = &a
	}
	caller := CallerOf(c)
	f, err := h.Feedback.Update(ctx(c), actor(c), caller.OrgID, id, version, ch)
	if err != nil {
		return conflictAs(err, feedback.ToObject)
	}
	setETag(c, f.Version)
	return c.JSON(http.StatusOK, feedback.ToObject(f))
}

// incoming maps an item sent in Curate's names or a seed's to Curate's
// item (see feedback.Incoming); a decision on is_training_data is the
// caller's.
func incoming(c echo.Context, v *errs.Invalid, in feedback.Incoming, prefix string) feedback.Item {
	it := in.Map(v, prefix, feedback.ShapeAny)
	it.DecidedBy = actor(c).Label
	return it
}

// batchDecodeError names the item a batch failed to decode on.
func batchDecodeError(body []byte, err error) error {
	var loose struct {
		Items []json.RawMessage `json:"items"`
	}
	if json.Unmarshal(body, &loose) != nil || len(loose.Items) == 0 {
		return errs.InvalidField(strings.TrimPrefix(jsonErrField(err), "."), "%s", jsonErrMessage(err))
	}
	v := &errs.Invalid{}
	for i, raw := range loose.Items {
		var it feedback.Incoming
		if err := strictUnmarshal(raw, &it); err != nil {
			v.Add(fmt.Sprintf("items[%d]%s", i, withoutEmbedded(jsonErrField(err), reflect.TypeOf(it))), "%s", jsonErrMessage(err))
		}
	}
	if !v.Has() {
		v.Add(strings.TrimPrefix(jsonErrField(err), "."), "%s", jsonErrMessage(err))
	}
	return v
}
