package handlers

import (
	"encoding/gob"
	"net/http"
	"time"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/views"
)

const sessionName = "curate_session"

func init() { gob.Register(views.Flash{}) }

// Sessions keeps the browser's session token, and flash messages, in a
// signed, encrypted cookie. The session itself is a row in the database
// (accounts.Service), so ending it there ends it on every server, whatever
// copies of the cookie exist.
type Sessions struct {
	store   *sessions.CookieStore
	onStart func(echo.Context)
}

// NewSessions makes the cookie store. hashKey signs (32 or 64 bytes) and
// blockKey encrypts (32 bytes) the cookie, which lives for ttl. onStart,
// when not nil, runs as a session starts, before its cookie is written:
// the server gives the browser a new CSRF token there.
func NewSessions(hashKey, blockKey []byte, ttl time.Duration, onStart func(echo.Context)) *Sessions {
	store := sessions.NewCookieStore(hashKey, blockKey)
	store.Options = &sessions.Options{Path: "/", MaxAge: int(ttl.Seconds()), HttpOnly: true, SameSite: http.SameSiteLaxMode}
	store.MaxAge(int(ttl.Seconds()))
	return &Sessions{store: store, onStart: onStart}
}

func (s *Sessions) get(c echo.Context) *sessions.Session {
	// A cookie that fails to decode (expired, tampered, old key) gives a new,
	// empty session: the user is simply signed out.
	sess, _ := s.store.Get(c.Request(), sessionName)
	sess.Options.Secure = isTLS(c)
	return sess
}

// Token returns the session token the browser's cookie holds, if any.
func (s *Sessions) Token(c echo.Context) (string, bool) {
	token, _ := s.get(c).Values["token"].(string)
	return token, token != ""
}

// Start keeps a new session's token in a fresh cookie.
func (s *Sessions) Start(c echo.Context, token string) error {
	if s.onStart != nil {
		s.onStart(c)
	}
	sess := s.get(c)
	sess.Values = map[any]any{"token": token}
	return sess.Save(c.Request(), c.Response())
}

// End signs the user out, keeping only pending flash messages.
func (s *Sessions) End(c echo.Context) error {
	sess := s.get(c)
	flashes := sess.Values["_flash"]
	sess.Values = map[any]any{}
	if flashes != nil {
		sess.Values["_flash"] = flashes
	}
	return sess.Save(c.Request(), c.Response())
}

// Flash queues a message for the next page.
func (s *Sessions) Flash(c echo.Context, kind, text string) {
	sess := s.get(c)
	sess.AddFlash(views.Flash{Kind: kind, Text: text})
	_ = sess.Save(c.Request(), c.Response())
}

// FlashLink queues a message with a link to what it is about.
func (s *Sessions) FlashLink(c echo.Context, kind, text, link, linkText string) {
	sess := s.get(c)
	sess.AddFlash(views.Flash{Kind: kind, Text: text, Link: link, LinkText: linkText})
	_ = sess.Save(c.Request(), c.Response())
}

// TakeFlashes returns and clears the queued messages.
func (s *Sessions) TakeFlashes(c echo.Context) []views.Flash {
	sess := s.get(c)
	raw := sess.Flashes()
	if len(raw) == 0 {
		return nil
	}
	_ = sess.Save(c.Request(), c.Response())
	out := make([]views.Flash, 0, len(raw))
	for _, f := range raw {
		if fl, ok := f.(views.Flash); ok {
			out = append(out, fl)
		}
	}
	return out
}

func isTLS(c echo.Context) bool {
	return c.Request().TLS != nil || c.Scheme() == "https"
}
