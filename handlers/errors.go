package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/views"
)

// Problem is an RFC 9457 problem document, the API's error body.
type Problem struct {
	Type    string            `json:"type"`
	Title   string            `json:"title"`
	Status  int               `json:"status"`
	Detail  string            `json:"detail,omitempty"`
	Errors  []errs.FieldError `json:"errors,omitempty"`
	Current any               `json:"current,omitempty"`
}

// retryUnavailable is the Retry-After of a 503 while the database cannot
// be reached: long enough for a restart or a failover to finish.
const retryUnavailable = 5 * time.Second

// HandleError turns any error a handler returns into the answer its caller
// expects: problem+json on /api, a fragment for HTMX, a page otherwise.
// Unexpected errors are logged and answered with a 500 that shows nothing
// internal; an unreachable database is a 503 with Retry-After.
func (h *Handlers) HandleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := h.problemFor(err, c)
	switch p.Status {
	case http.StatusInternalServerError:
		h.Log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	case http.StatusServiceUnavailable:
		h.Log.Warn("database unreachable", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(retryUnavailable.Seconds())))
	}
	var tooMany *errs.TooMany
	if errors.As(err, &tooMany) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(tooMany.RetryAfter.Seconds()))))
	}

	var werr error
	switch {
	case IsAPI(c):
		c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
		werr = c.JSON(p.Status, p)
	case isHTMX(c):
		// HTMX swaps only 2xx answers by default; an error fragment goes to
		// the page's flash area.
		c.Response().Header().Set("HX-Retarget", "#main")
		c.Response().Header().Set("HX-Reswap", "afterbegin")
		werr = render(c, p.Status, views.ErrorFragment(views.ErrorView{Status: p.Status, Title: p.Title, Message: p.Detail}))
	case p.Status == http.StatusUnauthorized:
		werr = c.Redirect(http.StatusSeeOther, "/login?next="+urlQueryEscape(c.Request().URL.RequestURI()))
	default:
		werr = render(c, p.Status, views.ErrorPage(h.page(c, p.Title, ""), views.ErrorView{Status: p.Status, Title: p.Title, Message: p.Detail}))
	}
	if werr != nil {
		h.Log.Error("writing error response", "err", werr)
	}
}

func (h *Handlers) problemFor(err error, c echo.Context) Problem {
	var (
		badQuery *queryError
		invalid  *errs.Invalid
		conflict *errs.Conflict
		tooMany  *errs.TooMany
		unavail  *errs.Unavailable
		httpErr  *echo.HTTPError
	)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		return problem(http.StatusNotFound, statusTitle(http.StatusNotFound), "There is nothing here, or it belongs to another organisation.")
	case errors.Is(err, errs.ErrForbidden):
		return problem(http.StatusForbidden, statusTitle(http.StatusForbidden), "Your role does not allow this.")
	case errors.As(err, &badQuery):
		p := problem(http.StatusBadRequest, "Bad request", "Unknown query parameters: "+strings.Join(badQuery.Fields(), ", "))
		p.Errors = badQuery.Errors
		return p
	case errors.As(err, &invalid):
		p := problem(http.StatusUnprocessableEntity, "Invalid input", "Some fields need correcting.")
		p.Errors = invalid.Errors
		if len(invalid.Errors) == 1 {
			p.Detail = invalid.Errors[0].Field + ": " + invalid.Errors[0].Message
		}
		return p
	case errors.As(err, &conflict):
		p := problem(http.StatusConflict, "Conflict", conflict.Message)
		p.Current = conflict.Current
		return p
	case errors.As(err, &tooMany):
		return problem(http.StatusTooManyRequests, "Too many requests", tooMany.Message)
	case errors.As(err, &unavail):
		return problem(http.StatusServiceUnavailable, "Not served now", unavail.Message)
	case errors.As(err, &httpErr):
		return problem(httpErr.Code, statusTitle(httpErr.Code), httpMessage(httpErr))
	case databaseDown(err):
		return problem(http.StatusServiceUnavailable, "Try again shortly",
			"Curate cannot reach its database just now. Try again in a few seconds.")
	}
	return problem(http.StatusInternalServerError, "Something went wrong", "The error was logged. Try again, and tell your administrator if it persists.")
}

// databaseDown reports whether err says the database cannot be reached
// now, rather than that the request went wrong: no connection could be
// made (refused, unreachable, or the wait for one ran out, which the pool
// reports as a bare deadline), the connection broke mid-query, or the
// server is shutting down or starting (SQLSTATE class 08, 57P01-57P03).
// Nothing is wrong with the request then, and the same one is likely to
// work once the database is back: it is a 503, not a 500. An HTTP call to
// another server (a *url.Error) failing is not the database.
func databaseDown(err error) bool {
	var (
		connect *pgconn.ConnectError
		netErr  net.Error
		pgErr   *pgconn.PgError
		urlErr  *url.Error
	)
	switch {
	case errors.As(err, &urlErr):
		return false
	case errors.As(err, &connect), errors.As(err, &netErr),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &pgErr):
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	return false
}

// statusTitle is the title of an error page and a problem's title for a
// status: the same words whether a handler or the router refused, so an
// unknown path and an unknown id both read "Not found".
func statusTitle(status int) string {
	switch status {
	case http.StatusNotFound:
		return "Not found"
	case http.StatusForbidden:
		return "Forbidden"
	}
	return http.StatusText(status)
}

func problem(status int, title, detail string) Problem {
	return Problem{Type: "about:blank", Title: title, Status: status, Detail: detail}
}

// httpMessage is the user-facing text of an echo error: echo's own messages
// for routing, body limits and CSRF are safe to show; anything else is not.
func httpMessage(e *echo.HTTPError) string {
	switch e.Code {
	case http.StatusNotFound:
		return "There is nothing here, or it belongs to another organisation."
	case http.StatusMethodNotAllowed:
		return "This address does not take that method."
	case http.StatusRequestEntityTooLarge:
		return "The request body is too large."
	case http.StatusForbidden:
		if msg, ok := e.Message.(string); ok && strings.Contains(strings.ToLower(msg), "csrf") {
			return "The form's security token is missing or wrong. Reload the page and try again."
		}
		return "Your role does not allow this."
	case http.StatusBadRequest:
		if msg, ok := e.Message.(string); ok {
			return msg
		}
		return "The request could not be read."
	case http.StatusUnauthorized:
		if msg, ok := e.Message.(string); ok {
			return msg
		}
		return "Sign in first."
	}
	if msg, ok := e.Message.(string); ok && e.Code < 500 {
		return msg
	}
	return fmt.Sprintf("%d %s", e.Code, http.StatusText(e.Code))
}
