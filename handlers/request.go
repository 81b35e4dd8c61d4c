package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyset"
)

// Reading a request: its path id, query parameters, list page, JSON body
// and If-Match version, and whether htmx sent it. Handlers read their
// input through these so that every route refuses bad input the same way.

// pathID parses the :id path parameter; a malformed id is simply not found.
func pathID(c echo.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return uuid.Nil, errs.ErrNotFound
	}
	return id, nil
}

// isHTMX reports whether htmx sent the request, so a fragment is enough.
func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// IsAPI reports whether the request is for the API (/api/...): a caller
// with an API key, answered in JSON (errors as problem+json), never a page.
func IsAPI(c echo.Context) bool { return strings.HasPrefix(c.Request().URL.Path, "/api/") }

// queryError is a query parameter the route does not take: a 400 naming
// it, since a misspelt filter must never silently widen a list.
type queryError struct{ *errs.Invalid }

// queryParams returns the request's query parameters, refusing any that
// is not in allowed. Every API handler reads its query through it.
func queryParams(c echo.Context, allowed ...string) (url.Values, error) {
	q := c.QueryParams()
	bad := &errs.Invalid{}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if slices.Contains(allowed, name) {
			continue
		}
		if len(allowed) == 0 {
			bad.Add(name, "is not a query parameter here: this route takes none")
		} else {
			bad.Add(name, "is not a query parameter here; this route takes %s", strings.Join(allowed, ", "))
		}
	}
	if bad.Has() {
		return nil, &queryError{bad}
	}
	return q, nil
}

// pageParams are the query parameters of every list.
var pageParams = []string{"limit", "cursor"}

// listPage reads a list's ?limit= and ?cursor=, the cursor with the list's
// own parser (cursorIn for keyset lists).
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

// wantPreview reads a list's ?preview=: "1" (or "true") asks for long
// texts cut short.
func wantPreview(q url.Values) (bool, error) {
	switch q.Get("preview") {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, errs.InvalidField("preview", `must be "1" or "0"`)
}

// cursorIn parses cursors of the named keyset list; a cursor from another
// list is an invalid "cursor".
func cursorIn(list string) func(string) (*keyset.Cursor, error) {
	return func(s string) (*keyset.Cursor, error) { return keyset.Parse(list, s) }
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

// ifMatch reads the version a write is conditional on from If-Match
// ("3", W/"3" or "\"3\""): the ETag the caller read. 0 when the header is
// absent: the write applies over whatever is stored (last write wins),
// and the service's audit record says so.
func ifMatch(c echo.Context) (int32, error) {
	s := strings.Trim(strings.TrimPrefix(c.Request().Header.Get("If-Match"), "W/"), `"`)
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v < 1 {
		return 0, errs.InvalidField("If-Match", "must be the version number of the ETag you read")
	}
	return int32(v), nil
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
	// Postgres cannot store NUL in text: refuse it here, naming the field,
	// for every JSON body at once. The scan runs only when the escape is
	// there at all.
	if bytes.Contains(body, []byte(`\u0000`)) {
		if field, ok := nulField(body); ok {
			return nil, errs.InvalidField(field, "contains a NUL character")
		}
	}
	return body, nil
}

// nulField walks a JSON document's tokens and names the first string, key
// or value, that holds a NUL character, as "items[3].tags[0]".
func nulField(body []byte) (string, bool) {
	type level struct {
		array bool
		index int
		key   string
	}
	var stack []level
	path := func() string {
		var b strings.Builder
		for _, l := range stack {
			if l.array {
				fmt.Fprintf(&b, "[%d]", l.index)
			} else if l.key != "" {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(l.key)
			}
		}
		if b.Len() == 0 {
			return "body"
		}
		return b.String()
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		top := len(stack) - 1
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, level{array: t == '['})
				expectKey = t == '{'
				continue
			default:
				stack = stack[:top]
			}
		case string:
			if expectKey {
				if strings.ContainsRune(t, 0) {
					return path(), true
				}
				stack[top].key = t
				expectKey = false
				continue
			}
			if strings.ContainsRune(t, 0) {
				return path(), true
			}
		}
		// A value ended: the next token in an object is a key, in an array
		// the next element.
		if top = len(stack) - 1; top >= 0 {
			if stack[top].array {
				stack[top].index++
			} else {
				expectKey = true
			}
		}
	}
}

// decodeJSON reads a JSON body strictly: valid UTF-8, known fields only,
// one value. Errors name the field.
func decodeJSON(c echo.Context, v any, prefix string) error {
	body, err := readJSONBody(c)
	if err != nil {
		return err
	}
	if err := strictUnmarshal(body, v); err != nil {
		return errs.InvalidField(prefix+bodyField(err, v), "%s", jsonErrMessage(err))
	}
	return nil
}

// decodeOptionalJSON is decodeJSON for a body the request may leave out:
// an empty body reads as {}.
func decodeOptionalJSON(c echo.Context, v any) error {
	if c.Request().ContentLength == 0 {
		return nil
	}
	return decodeJSON(c, v, "")
}

// bodyField is the field of v a decoding error is about, as the request
// names it ("" for the body as a whole).
func bodyField(err error, v any) string {
	return withoutEmbedded(strings.TrimPrefix(jsonErrField(err), "."), reflect.TypeOf(v))
}

// withoutEmbedded drops from a decoding error's path the Go names of the
// structs t embeds, which encoding/json puts in it ("Input.rating"): the
// request knows only the JSON names.
func withoutEmbedded(field string, t reflect.Type) string {
	embedded := map[string]bool{}
	var walk func(reflect.Type, int)
	walk = func(t reflect.Type, depth int) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || depth > 8 {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				embedded[f.Name] = true
			}
			walk(f.Type, depth+1)
		}
	}
	walk(t, 0)
	if len(embedded) == 0 {
		return field
	}
	var parts []string
	for _, p := range strings.Split(field, ".") {
		if !embedded[p] {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ".")
}

// strictUnmarshal decodes one JSON value, refusing unknown fields and
// anything after the value.
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
