package langfuse

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/curate/curate/internal/outbound"
)

var (
	// ErrUnauthorized matches answers 401 and 403: the public/secret key pair
	// is wrong, revoked, or belongs to another deployment.
	ErrUnauthorized = errors.New("langfuse: unauthorized")
	// ErrUnreachable matches failures to get any HTTP answer: DNS, refused
	// connections, TLS failures, timeouts.
	ErrUnreachable = errors.New("langfuse: unreachable")
	// ErrNotFound matches answers 404: an unknown trace, or an endpoint the
	// deployment does not have.
	ErrNotFound = errors.New("langfuse: not found")
)

// StatusError is a non-2xx answer from Langfuse. errors.Is matches it
// against ErrUnauthorized (401, 403) and ErrNotFound (404); it unwraps to
// an *outbound.StatusError, so outbound.Describe reads its status.
type StatusError struct {
	Host       string        // base URL the client talks to
	Path       string        // request path, like /api/public/v3/scores
	StatusCode int           // HTTP status
	Body       string        // the body's "message" (and "error"), or its text: for the log only
	RetryAfter time.Duration // the server's Retry-After, when it sent one
}

// Error names the request and the status, never the body: it is written to
// job records, and the body is what the remote server chose to say.
func (e *StatusError) Error() string {
	return fmt.Sprintf("langfuse: GET %s at %s answered %d %s", e.Path, e.Host, e.StatusCode, http.StatusText(e.StatusCode))
}

// Is lets errors.Is classify a StatusError by its status code.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	}
	return false
}

func (e *StatusError) Unwrap() error {
	return &outbound.StatusError{Status: e.StatusCode, Body: e.Body}
}

// AnswerError is a 2xx answer that is not what Langfuse sends: the host is
// some other server, or a proxy's sign-in page.
type AnswerError struct {
	Host string
	Path string
	Err  error // what did not decode, for the log
}

func (e *AnswerError) Error() string {
	return fmt.Sprintf("langfuse: the answer to GET %s at %s is not the expected JSON: %v", e.Path, e.Host, e.Err)
}

func (e *AnswerError) Unwrap() error { return e.Err }

// Describe is the sentence a page shows for a failed call to Langfuse:
// outbound.Describe's reason (the status, or why no answer came) and what
// to do about it. It never holds the remote server's text, nor the
// addresses the host resolved to; the error itself, and a StatusError's
// Body, are for the log.
func Describe(err error) string {
	var (
		serr   *StatusError
		answer *AnswerError
	)
	reason := outbound.Describe(err)
	switch {
	case errors.As(err, &answer):
		return "The answer was not what Langfuse sends: is " + answer.Host + " a Langfuse deployment?"
	case errors.As(err, &serr):
		switch code := serr.StatusCode; {
		case code == http.StatusUnauthorized:
			return reason + " Langfuse rejected the API keys: copy both from the Langfuse project settings, API keys (public key pk-lf-…, secret key sk-lf-…), and check that they belong to a project on this host."
		case code == http.StatusForbidden:
			return reason + " Langfuse refused access to these keys: use a project's public key with its own secret key."
		case code == http.StatusNotFound:
			return reason + " Is " + serr.Host + " the Langfuse base URL (the address of its web UI, like https://cloud.langfuse.com)?"
		case code == http.StatusTooManyRequests:
			wait := ""
			if serr.RetryAfter > 0 {
				wait = fmt.Sprintf(" (it asks to wait %s)", serr.RetryAfter)
			}
			return reason + " Langfuse is rate limiting Curate" + wait + ": import less often or raise the project's rate limit."
		case code >= 500:
			return reason + " It is an error on Langfuse's side: try again later, and check the deployment's health if it persists."
		}
		return reason
	case errors.Is(err, ErrUnreachable):
		return reason + " Check the host URL, and that this server may connect to it."
	}
	return reason
}

// errorMessage pulls the human-readable part out of an error body. Langfuse
// answers {"message": "...", "error": "..."}, where "error" is sometimes a
// name and sometimes a list of validation issues; proxies in front of it
// answer HTML or plain text, of which a short excerpt is kept.
func errorMessage(body []byte) string {
	var e struct {
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && (e.Message != "" || len(e.Error) > 0) {
		var name string
		detail := ""
		if json.Unmarshal(e.Error, &name) == nil {
			detail = name
		} else if len(e.Error) > 0 && string(e.Error) != "null" {
			detail = string(e.Error)
		}
		switch {
		case e.Message == "":
			return truncate(detail, 300)
		case detail == "" || strings.Contains(e.Message, detail):
			return truncate(e.Message, 300)
		default:
			return truncate(e.Message+" ("+detail+")", 300)
		}
	}
	text := strings.Join(strings.Fields(string(body)), " ")
	return truncate(text, 200)
}

// truncate shortens s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
