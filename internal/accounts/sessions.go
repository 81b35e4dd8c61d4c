package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
)

// ErrNoSession is the answer for a cookie that names no live session:
// never signed in, signed out, expired, or ended by a change to its user.
var ErrNoSession = errors.New("no such session")

// Session is a signed-in browser.
type Session struct {
	Token     string // the cookie's secret; only its hash is stored
	User      db.User
	ExpiresAt time.Time
}

// SessionInfo is one of a user's sessions as their account page lists it.
type SessionInfo struct {
	CreatedAt  time.Time
	LastSeenAt time.Time
	UserAgent  string
	IP         string
	Current    bool // the session of the browser asking
}

// lastSeenPrecision is how stale a session's last_seen_at may grow before
// a request writes it again: reading the session is on every page request,
// writing it need not be.
const lastSeenPrecision = time.Minute

// maxUserAgent bounds the user agent kept with a session.
const maxUserAgent = 300

// sessionID is the stored form of a session token.
func sessionID(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// startSession stores a new session for u and returns its token.
func (s *Service) startSession(ctx context.Context, q *db.Queries, u db.User, ip, userAgent string) (Session, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return Session{}, err
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	expires := s.Now().Add(s.SessionTTL)
	err := q.SessionInsert(ctx, db.SessionInsertParams{ID: sessionID(token), UserID: u.ID, OrgID: u.OrgID,
		ExpiresAt: expires, UserAgent: cleanUserAgent(userAgent), Ip: ip})
	return Session{Token: token, User: u, ExpiresAt: expires}, err
}

// cleanUserAgent keeps a user agent header storable and short: valid
// UTF-8, no control characters, at most maxUserAgent bytes.
func cleanUserAgent(ua string) string {
	ua = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(ua, ""))
	for len(ua) > maxUserAgent {
		ua = ua[:maxUserAgent]
		ua = strings.ToValidUTF8(ua, "") // a rune cut in half
	}
	return ua
}

// SessionCaller returns the live session a cookie's token names, with its
// user and organisation, in one query: it runs on every page request.
// Ended, expired and deactivated users' sessions give ErrNoSession.
func (s *Service) SessionCaller(ctx context.Context, token string) (db.SessionGetWithUserRow, error) {
	if token == "" {
		return db.SessionGetWithUserRow{}, ErrNoSession
	}
	id := sessionID(token)
	q := db.New(s.Pool)
	row, err := q.SessionGetWithUser(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return row, ErrNoSession
	}
	if err != nil {
		return row, err
	}
	if s.Now().Sub(row.LastSeenAt) > lastSeenPrecision {
		if err := q.SessionUpdateLastSeen(ctx, id); err != nil {
			return row, err
		}
	}
	return row, nil
}

// SignOut ends the session of token, on every server, and audits it. A
// session already ended is no error.
func (s *Service) SignOut(ctx context.Context, token, ip string) error {
	if token == "" {
		return nil
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		gone, err := q.SessionDelete(ctx, sessionID(token))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, audit.Actor{Kind: "user", ID: gone.UserID, Label: gone.Email, IP: ip},
			audit.Entry{OrgID: gone.OrgID, Action: "auth.logout", TargetType: "user", TargetID: gone.UserID.String()})
	})
}

// SignOutEverywhere ends every session of the user, this one included.
func (s *Service) SignOutEverywhere(ctx context.Context, actor audit.Actor, orgID, userID uuid.UUID) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		n, err := q.SessionDeleteByUser(ctx, userID)
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "auth.logout_everywhere", TargetType: "user",
			TargetID: userID.String(), Details: map[string]any{"sessions": n}})
	})
}

// ListSessions returns the user's live sessions, most recently used
// first, marking the one whose token is current.
func (s *Service) ListSessions(ctx context.Context, userID uuid.UUID, current string) ([]SessionInfo, error) {
	rows, err := db.New(s.Pool).SessionListByUser(ctx, userID)
	if err != nil {
		return nil, err
	}
	cur := sessionID(current)
	out := make([]SessionInfo, len(rows))
	for i, r := range rows {
		out[i] = SessionInfo{CreatedAt: r.CreatedAt, LastSeenAt: r.LastSeenAt, UserAgent: r.UserAgent, IP: r.Ip,
			Current: auth.HashMatches(r.ID, cur)}
	}
	return out, nil
}

// PasswordChange is the input for ChangePassword.
type PasswordChange struct {
	Current   string
	New       string
	UserAgent string // of the browser asking, for the session it keeps
}

// ChangePassword sets a user's own password after checking their current
// one, ends all their sessions and starts a new one for the browser that
// asked. A wrong current password counts towards the sign-in lockout, so a
// borrowed session cannot be used to guess it.
func (s *Service) ChangePassword(ctx context.Context, actor audit.Actor, orgID, userID uuid.UUID, in PasswordChange) (Session, error) {
	u, err := s.GetUser(ctx, orgID, userID)
	if err != nil {
		return Session{}, err
	}
	v := &errs.Invalid{}
	if err := auth.CheckPasswordStrength(in.New); err != nil {
		v.Add("new_password", "%s", err.Error())
	}
	at, err := s.reserveAttempt(ctx, u.Email, actor.IP)
	if err != nil {
		return Session{}, err
	}
	if at == nil {
		return Session{}, s.tooMany()
	}
	ctx = context.WithoutCancel(ctx) // the check is counted whether or not the client waits
	defer at.release(ctx)
	match, err := auth.VerifyPassword(u.PasswordHash, in.Current)
	if err != nil {
		return Session{}, err
	}
	q := db.New(s.Pool)
	if !match {
		if err := q.LoginFailureUpdateConfirmed(ctx, at.id); err != nil {
			return Session{}, err
		}
		at.settled = true
		if err := auditFailure(ctx, q, &u, u.Email, actor.IP, "wrong current password"); err != nil {
			return Session{}, err
		}
		v.Add("current_password", "this is not your current password")
	} else {
		if err := q.LoginFailureDelete(ctx, db.LoginFailureDeleteParams{Email: u.Email, Attempt: at.id}); err != nil {
			return Session{}, err
		}
		at.settled = true
	}
	if v.Has() {
		return Session{}, v
	}
	hash, err := auth.HashPassword(in.New)
	if err != nil {
		return Session{}, err
	}
	var sess Session
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.UserUpdatePassword(ctx, db.UserUpdatePasswordParams{OrgID: orgID, ID: userID, PasswordHash: hash}); err != nil {
			return err
		}
		n, err := q.SessionDeleteByUser(ctx, userID)
		if err != nil {
			return err
		}
		if sess, err = s.startSession(ctx, q, u, actor.IP, in.UserAgent); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "user.password_change", TargetType: "user",
			TargetID: userID.String(), Details: map[string]any{"sessions_ended": n}})
	})
	return sess, err
}
