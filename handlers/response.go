package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyset"
)

// Writing an answer: pages, redirects, ETags, list pages and the body of a
// conflict. Every handler answers through these so that the API has one
// shape for each.

// render writes a templ component with a status code. The page is rendered
// into one of templ's pooled buffers first: it goes out in one write with
// its length, and a rendering error becomes a clean error page instead of
// half a page.
func render(c echo.Context, status int, cmp templ.Component) error {
	buf := templ.GetBuffer()
	defer templ.ReleaseBuffer(buf)
	if err := cmp.Render(ctx(c), buf); err != nil {
		return err
	}
	return c.Blob(status, echo.MIMETextHTMLCharsetUTF8, buf.Bytes())
}

// redirect answers a form post: a 303 so the browser follows with a GET.
func redirect(c echo.Context, to string) error {
	if isHTMX(c) {
		c.Response().Header().Set("HX-Redirect", to)
		return c.NoContent(http.StatusNoContent)
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// setETag sends an object's version as its ETag, for If-Match.
func setETag(c echo.Context, version int32) {
	c.Response().Header().Set("ETag", fmt.Sprintf(`W/"%d"`, version))
}

// etagListed says whether an If-None-Match header names etag, weakly
// compared (RFC 9110, 13.1.2): "*", or a list of tags with or without W/.
func etagListed(header, etag string) bool {
	etag = strings.TrimPrefix(etag, "W/")
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}

// listBody is every list's answer: a page of objects, each in the shape
// GET /:id answers, and the cursor of the next page, left out on the last.
type listBody[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// listJSON answers a page of the named keyset list.
func listJSON[T any](c echo.Context, list string, rows []T, next *keyset.Cursor) error {
	out := listBody[T]{Data: rows}
	if out.Data == nil {
		out.Data = []T{}
	}
	if next != nil {
		out.NextCursor = next.Encode(list)
	}
	return c.JSON(http.StatusOK, out)
}

// previewRunes is how much of a long text a list asked for with preview=1
// keeps.
const previewRunes = 300

// preview cuts a text to previewRunes characters, marking the cut with an
// ellipsis.
func preview(s string) string {
	n := 0
	for i := range s {
		if n == previewRunes {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// conflictAs puts a conflict's current row in the API's shape, so a 409
// carries the object as GET /:id would show it now; other errors pass
// through.
func conflictAs[Row, Object any](err error, shape func(Row) Object) error {
	var conflict *errs.Conflict
	if errors.As(err, &conflict) {
		if row, ok := conflict.Current.(Row); ok {
			conflict.Current = shape(row)
		}
	}
	return err
}
