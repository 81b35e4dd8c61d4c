package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
)

// APIFeedbackCreate stores one item: 201 with it, or 200 with the stored
// one when its external_id was already stored.
func (h *Handlers) APIFeedbackCreate(c echo.Context) error {
	var it feedback.Item
	if err := decodeJSON(c, &it, ""); err != nil {
		return err
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
	body, err := readJSONBody(c)
	if err != nil {
		return err
	}
	var batch struct {
		Items []feedback.Item `json:"items"`
	}
	if err := strictUnmarshal(body, &batch); err != nil {
		// Decode again item by item, only to name the bad item's index.
		return batchDecodeError(body, err)
	}
	res, err := h.Feedback.IngestBatch(ctx(c), CallerOf(c).OrgID, "api", batch.Items)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// APIFeedbackList lists the queue with the page's filters and a cursor.
func (h *Handlers) APIFeedbackList(c echo.Context) error {
	q := c.QueryParams()
	f, err := feedback.ParseFilter(q)
	if err != nil {
		return err
	}
	limit, cursor, err := listPage(q, feedback.ParseCursor)
	if err != nil {
		return err
	}
	page, err := h.Feedback.List(ctx(c), CallerOf(c).OrgID, f, cursor, limit)
	if err != nil {
		return err
	}
	out := struct {
		Data       []feedback.ListObject `json:"data"`
		NextCursor string                `json:"next_cursor,omitempty"`
	}{Data: make([]feedback.ListObject, len(page.Rows))}
	for i, r := range page.Rows {
		out.Data[i] = feedback.ToListObject(r)
	}
	if page.Next != nil {
		out.NextCursor = page.Next.Encode()
	}
	return c.JSON(http.StatusOK, out)
}

// APIFeedbackGet returns one item with its review history.
func (h *Handlers) APIFeedbackGet(c echo.Context) error {
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
	id, err := pathID(c)
	if err != nil {
		return err
	}
	ifMatch := strings.Trim(strings.TrimPrefix(c.Request().Header.Get("If-Match"), "W/"), `"`)
	if ifMatch == "" {
		return echo.NewHTTPError(http.StatusPreconditionRequired, "Send If-Match with the item's version (its ETag), so a concurrent change is never overwritten.")
	}
	version, err := strconv.ParseInt(ifMatch, 10, 32)
	if err != nil {
		return errs.InvalidField("If-Match", "must be the item's version number")
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
	f, err := h.Feedback.Update(ctx(c), actor(c), caller.OrgID, id, int32(version), ch)
	var conflict *errs.Conflict
	if errors.As(err, &conflict) {
		// Answer with the item as it is now, in the API's shape.
		if row, ok := conflict.Current.(db.Feedback); ok {
			conflict.Current = feedback.ToObject(row)
		}
		return conflict
	}
	if err != nil {
		return err
	}
	setETag(c, f.Version)
	return c.JSON(http.StatusOK, feedback.ToObject(f))
}

func setETag(c echo.Context, version int32) {
	c.Response().Header().Set("ETag", fmt.Sprintf(`W/"%d"`, version))
}

// listPage reads a list's ?limit= and ?cursor=, the cursor with the list's
// own parser.
func listPage[C any](q url.Values, parseCursor func(string) (C, error)) (int, C, error) {
	var none C
	limit, err := listLimit(q.Get("limit"))
	if err != nil {
		return 0, none, err
	}
	cursor, err := parseCursor(q.Get("cursor"))
	if err != nil {
		return 0, none, err
	}
	return limit, cursor, nil
}

// listLimit reads ?limit= (default 50, at most 500).
func listLimit(s string) (int, error) {
	if s == "" {
		return 50, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 500 {
		return 0, errs.InvalidField("limit", "must be 1 to 500")
	}
	return n, nil
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
		var it feedback.Item
		if err := strictUnmarshal(raw, &it); err != nil {
			v.Add(fmt.Sprintf("items[%d]%s", i, jsonErrField(err)), "%s", jsonErrMessage(err))
		}
	}
	if !v.Has() {
		v.Add(strings.TrimPrefix(jsonErrField(err), "."), "%s", jsonErrMessage(err))
	}
	return v
}

// readJSONBody reads a request body that must be JSON in valid UTF-8.
func readJSONBody(c echo.Context) ([]byte, error) {
	if ct := c.Request().Header.Get(echo.HeaderContentType); !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return nil, errs.InvalidField("Content-Type", "send application/json")
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return nil, err // a body over the limit becomes 413 in the middleware
	}
	if !utf8.Valid(body) {
		return nil, errs.InvalidField("body", "is not valid UTF-8")
	}
	return body, nil
}

// decodeJSON reads a JSON body strictly: valid UTF-8, known fields only,
// one value. Errors name the field.
func decodeJSON(c echo.Context, v any, prefix string) error {
	body, err := readJSONBody(c)
	if err != nil {
		return err
	}
	if err := strictUnmarshal(body, v); err != nil {
		return errs.InvalidField(prefix+strings.TrimPrefix(jsonErrField(err), "."), "%s", jsonErrMessage(err))
	}
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// jsonErrField is the field a decoding error is about, as ".name" or "".
func jsonErrField(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return "." + typeErr.Field
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "." + strings.Trim(f, `"`)
	}
	return ""
}

func jsonErrMessage(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return "must be " + jsonType(typeErr.Type.Kind().String()) + ", not " + typeErr.Value
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return "is not a known field"
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	}
	return err.Error()
}

func jsonType(kind string) string {
	switch kind {
	case "int", "int16", "int32", "int64":
		return "a whole number"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	case "bool":
		return "true or false"
	}
	return kind
}
