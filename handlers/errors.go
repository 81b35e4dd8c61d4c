package handlers

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

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

// HandleError turns any error a handler returns into the answer its caller
// expects: problem+json on /api, a fragment for HTMX, a page otherwise.
// Unexpected errors are logged and answered with a 500 that shows nothing
// internal.
func (h *Handlers) HandleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := h.problemFor(err, c)
	if p.Status == http.StatusInternalServerError {
		h.Log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	var tooMany *errs.TooMany
	if errors.As(err, &tooMany) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(tooMany.RetryAfter.Seconds()))))
	}

	var werr error
	switch {
	case strings.HasPrefix(c.Request().URL.Path, "/api/"):
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
		httpErr  *echo.HTTPError
	)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		return problem(http.StatusNotFound, "Not found", "There is nothing here, or it belongs to another organisation.")
	case errors.Is(err, errs.ErrForbidden):
		return problem(http.StatusForbidden, "Forbidden", "Your role does not allow this.")
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
	case errors.As(err, &httpErr):
		return problem(httpErr.Code, http.StatusText(httpErr.Code), httpMessage(httpErr))
	}
	return problem(http.StatusInternalServerError, "Something went wrong", "The error was logged. Try again, and tell your administrator if it persists.")
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
		if msg, ok := e.Message.(string); ok && strings.Contains(strings.ToLower(msg), "csrf") {
			return "The form's security token is missing. Reload the page and try again."
		}
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
