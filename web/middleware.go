package web

import (
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/handlers"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/errs"
)

// securityHeaders sets a strict Content-Security-Policy (scripts and styles
// only from this origin, nothing inline) and the usual hardening headers.
// An API response is JSON or a file, never a document to run: it gets the
// policy that allows nothing and the no-sniffing header, and none of the
// headers only a page uses (frame, referrer, opener, permissions; the
// policy's frame-ancestors already refuses framing). Each header is
// written and parsed on every call of the hottest paths (assignment
// answers in about 140 bytes of JSON), so those would be work for nothing.
func securityHeaders(tls bool) echo.MiddlewareFunc {
	const page = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	const api = "default-src 'none'; frame-ancestors 'none'"
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			h.Set("X-Content-Type-Options", "nosniff")
			if tls {
				h.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
			}
			if handlers.IsAPI(c) {
				h.Set("Content-Security-Policy", api)
				return next(c)
			}
			h.Set("Content-Security-Policy", page)
			h.Set("X-Frame-Options", "DENY")
			h.Set("Referrer-Policy", "same-origin")
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
			return next(c)
		}
	}
}

// bodyRate bounds how long a request body may take to arrive: timeout
// from the start of the request, plus a second for every minRate bytes
// received, so that a large upload at a slow but steady rate goes through
// while a client trickling a byte at a time is cut off about timeout in.
// The server's ReadTimeout is the same timeout for everything read before
// this runs. Once the body is read (at once, for a request without one)
// the deadline is lifted: a handler that works for longer than timeout
// must not have its request cancelled by a read deadline passing.
func bodyRate(timeout time.Duration, minRate int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			rc := http.NewResponseController(c.Response())
			if req.Body == nil || req.Body == http.NoBody {
				_ = rc.SetReadDeadline(time.Time{})
				return next(c)
			}
			r := &rateReader{ReadCloser: req.Body, rc: rc, start: time.Now(), timeout: timeout, minRate: minRate}
			if err := r.extend(); err != nil {
				return next(c) // the server's ReadTimeout still bounds the whole request
			}
			req.Body = r
			err := next(c)
			if r.tooSlow && !c.Response().Committed {
				// The server has cancelled the request; a plain answer is
				// all that can still be written, and the connection closes.
				c.Response().Header().Set(echo.HeaderConnection, "close")
				return c.String(http.StatusRequestTimeout, "The request body arrived too slowly.\n")
			}
			return err
		}
	}
}

// rateReader moves its connection's read deadline as the body arrives,
// and lifts it at the body's end.
type rateReader struct {
	io.ReadCloser
	rc      *http.ResponseController
	start   time.Time
	timeout time.Duration
	minRate int64
	read    int64
	set     time.Time // the deadline last set
	tooSlow bool      // the deadline passed
}

func (r *rateReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.read += int64(n)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		r.tooSlow = true
	case errors.Is(err, io.EOF):
		_ = r.rc.SetReadDeadline(time.Time{})
	case n > 0:
		_ = r.extend()
	}
	return n, err
}

// extend sets the deadline the bytes read so far earn, when it has moved
// by a tenth of a second or more.
func (r *rateReader) extend() error {
	d := r.start.Add(r.timeout + time.Duration(float64(r.read)/float64(r.minRate)*float64(time.Second)))
	if !r.set.IsZero() && d.Sub(r.set) < 100*time.Millisecond {
		return nil
	}
	r.set = d
	return r.rc.SetReadDeadline(d)
}

// bodyLimit refuses request bodies over limit bytes (or the larger limit of
// a bulk route) with a 413, whether the size is declared up front or only
// discovered while reading.
func bodyLimit(def int64, bulk map[string]int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			limit := def
			if l, ok := bulk[req.URL.Path]; ok && req.Method == http.MethodPost {
				limit = l
			}
			if req.ContentLength > limit {
				return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
			}
			req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
			err := next(c)
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
			}
			return err
		}
	}
}

// bearerToken returns the key of an Authorization: Bearer header and whether
// the header was sent at all; any other scheme gives an empty key, refused.
func bearerToken(c echo.Context) (token string, sent bool) {
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	if h == "" {
		return "", false
	}
	token, _ = strings.CutPrefix(h, "Bearer ")
	if token == h {
		return "", true
	}
	return strings.TrimSpace(token), true
}

// authenticate finds the caller: an API key on /api, else the session. It
// rejects a bad API key outright but leaves "nobody" to requireRole.
func (a *App) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if handlers.IsAPI(c) {
			if token, ok := bearerToken(c); ok {
				caller, err := a.keyCaller(c, token)
				if err != nil {
					return err
				}
				handlers.SetCaller(c, caller)
				return next(c)
			}
		}
		if token, ok := a.handlers.Sessions.Token(c); ok {
			// The session row, not the cookie, says who is signed in: a
			// copy of the cookie dies with the row.
			s, err := a.Accounts.SessionCaller(c.Request().Context(), token)
			switch {
			case errors.Is(err, accounts.ErrNoSession):
			case err != nil:
				return err
			default:
				handlers.SetCaller(c, &handlers.Caller{Kind: "session", OrgID: s.OrgID, OrgSlug: s.OrgSlug, OrgName: s.OrgName,
					Role: auth.Role(s.Role), UserID: s.UserID, Label: s.Email})
			}
		}
		return next(c)
	}
}

func (a *App) keyCaller(c echo.Context, token string) (*handlers.Caller, error) {
	k, err := a.handlers.Accounts.KeyCaller(c.Request().Context(), token)
	if err != nil {
		if errors.Is(err, accounts.ErrBadKey) {
			return nil, echo.NewHTTPError(http.StatusUnauthorized, "The API key is malformed, unknown or revoked.")
		}
		if errors.Is(err, accounts.ErrKeySuspended) {
			return nil, echo.NewHTTPError(http.StatusUnauthorized, "The API key is suspended: the user who created it is deactivated.")
		}
		return nil, err
	}
	return &handlers.Caller{Kind: "api_key", OrgID: k.OrgID, OrgSlug: k.OrgSlug, OrgName: k.OrgName, Role: k.Role, KeyID: k.ID, Label: k.Name}, nil
}

// limitAPIKeys gives each API key a token bucket; an empty one answers 429
// with Retry-After.
func (a *App) limitAPIKeys(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		caller := handlers.CallerOf(c)
		if caller == nil || caller.Kind != "api_key" {
			return next(c)
		}
		if ok, wait := a.keyLimiter.Allow(caller.KeyID.String()); !ok {
			return &errs.TooMany{Message: "this API key is over its request rate; slow down", RetryAfter: wait}
		}
		return next(c)
	}
}

// requireRole lets through callers with at least min; "" means public.
func requireRole(min auth.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if min == "" {
				return next(c)
			}
			caller := handlers.CallerOf(c)
			if caller == nil {
				return echo.NewHTTPError(http.StatusUnauthorized, "Sign in, or send an API key as Authorization: Bearer <key>.")
			}
			if !caller.Role.AtLeast(min) {
				return errs.ErrForbidden
			}
			return next(c)
		}
	}
}

// clientIP decides where a request comes from. Forwarding headers are
// believed only from the proxies the operator names: anyone else could
// write any address there, resetting the per-address sign-in limit and
// putting a false address in the audit log.
func clientIP(cfg config.Config) echo.IPExtractor {
	proxies, _ := cfg.Proxies() // checked by Validate
	if len(proxies) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range proxies {
		opts = append(opts, echo.TrustIPRange(netipToIPNet(p)))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

func netipToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// textInputs refuses NUL characters and invalid UTF-8 in every query
// parameter and every field of a URL-encoded form with a 422 naming the
// parameter, before any handler sees them: Postgres cannot store NUL in
// text, and a handler should never have to think about it. JSON bodies are
// checked where they are decoded, multipart forms where their files are read.
func textInputs(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		inv := &errs.Invalid{}
		checkValues(inv, c.QueryParams())
		if strings.HasPrefix(c.Request().Header.Get(echo.HeaderContentType), echo.MIMEApplicationForm) {
			form, err := c.FormParams()
			if err != nil {
				return err
			}
			checkValues(inv, form)
		}
		if inv.Has() {
			return inv
		}
		return next(c)
	}
}

func checkValues(inv *errs.Invalid, vals map[string][]string) {
	for name, vs := range vals {
		if !inv.Text("parameter name", name, math.MaxInt, false) {
			continue
		}
		for _, v := range vs {
			if !inv.Text(name, v, math.MaxInt, false) {
				break
			}
		}
	}
}
