package langfuse

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
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
// against ErrUnauthorized (401, 403) and ErrNotFound (404).
type StatusError struct {
	Host       string        // base URL the client talks to
	Path       string        // request path, like /api/public/v3/scores
	StatusCode int           // HTTP status
	Message    string        // the body's "message" (and "error"), or its text
	RetryAfter time.Duration // the server's Retry-After, when it sent one
}

func (e *StatusError) Error() string {
	detail := ""
	if e.Message != "" {
		detail = ": " + e.Message
	}
	status := fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	switch {
	case e.StatusCode == http.StatusUnauthorized:
		return fmt.Sprintf("Langfuse at %s rejected the API keys (%s%s): wrong public/secret key; copy both from the Langfuse project settings, API keys (public key pk-lf-…, secret key sk-lf-…), and check that they belong to a project on this host", e.Host, status, detail)
	case e.StatusCode == http.StatusForbidden:
		return fmt.Sprintf("Langfuse at %s refused access to GET %s (%s%s): wrong public/secret key or one without access; use a project key pair with its secret key", e.Host, e.Path, status, detail)
	case e.StatusCode == http.StatusNotFound:
		return fmt.Sprintf("Langfuse at %s has no GET %s (%s%s)", e.Host, e.Path, status, detail)
	case e.StatusCode == http.StatusTooManyRequests:
		wait := ""
		if e.RetryAfter > 0 {
			wait = fmt.Sprintf(" (it asks to wait %s)", e.RetryAfter)
		}
		return fmt.Sprintf("Langfuse at %s is rate limiting GET %s%s%s; import less often or raise the project's rate limit", e.Host, e.Path, wait, detail)
	case e.StatusCode >= 500:
		return fmt.Sprintf("Langfuse at %s failed on GET %s (%s%s); it is a server-side error: try again later, and check the deployment's health if it persists", e.Host, e.Path, status, detail)
	default:
		return fmt.Sprintf("Langfuse at %s refused GET %s (%s%s)", e.Host, e.Path, status, detail)
	}
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
