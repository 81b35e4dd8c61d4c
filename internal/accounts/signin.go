package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
)

// ErrBadCredentials is the one answer for an unknown e-mail, a wrong
// password and a deactivated user, so sign-in tells an attacker nothing.
var ErrBadCredentials = errors.New("wrong e-mail or password")

// Credentials are a sign-in attempt and where it comes from.
type Credentials struct {
	Email     string
	Password  string
	IP        string
	UserAgent string
}

// SignIn checks a password sign-in, enforcing the lockout policy, audits
// it and starts a session.
func (s *Service) SignIn(ctx context.Context, c Credentials) (Session, error) {
	q := db.New(s.Pool)
	ok, err := s.reserveAttempt(ctx, c.Email, c.IP)
	if err != nil {
		return Session{}, err
	}
	if !ok {
		auth.DummyVerify(c.Password)
		_ = audit.Record(ctx, q, audit.Actor{Kind: "anonymous", Label: c.Email, IP: c.IP},
			audit.Entry{Action: "auth.login_locked", TargetType: "user", Details: map[string]any{"email": c.Email}})
		return Session{}, s.tooMany()
	}

	u, err := q.UserGetByEmail(ctx, c.Email)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		auth.DummyVerify(c.Password)
		return Session{}, s.fail(ctx, q, nil, c, "unknown e-mail")
	case err != nil:
		return Session{}, err
	}
	ok, err = auth.VerifyPassword(u.PasswordHash, c.Password)
	if err != nil {
		return Session{}, err
	}
	if !ok {
		return Session{}, s.fail(ctx, q, &u, c, "wrong password")
	}
	if !u.Active {
		return Session{}, s.fail(ctx, q, &u, c, "deactivated")
	}
	var sess Session
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		// Success takes back the reserved attempt with the account's earlier failures.
		if err := q.LoginFailureDelete(ctx, c.Email); err != nil {
			return err
		}
		if sess, err = s.startSession(ctx, q, u, c.IP, c.UserAgent); err != nil {
			return err
		}
		return audit.Record(ctx, q, audit.Actor{Kind: "user", ID: u.ID, Label: u.Email, IP: c.IP},
			audit.Entry{OrgID: u.OrgID, Action: "auth.login", TargetType: "user", TargetID: u.ID.String()})
	})
	return sess, err
}

func (s *Service) tooMany() error {
	return &errs.TooMany{
		Message:    fmt.Sprintf("too many failed sign-ins: try again in %d minutes", int(s.Window.Minutes())),
		RetryAfter: s.Window,
	}
}

// reserveAttempt counts an attempt as a failure before its password is
// checked, unless the account or the address is already at its limit, in
// which case it reports false. Counting and adding happen under locks on
// the e-mail and the address, so parallel attempts cannot all see room for
// one more: exactly the limit's worth of passwords is ever checked.
func (s *Service) reserveAttempt(ctx context.Context, email, ip string) (bool, error) {
	var ok bool
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.LoginFailureGetForUpdate(ctx, db.LoginFailureGetForUpdateParams{Email: email, Ip: ip}); err != nil {
			return err
		}
		counts, err := q.LoginFailureCount(ctx, db.LoginFailureCountParams{Email: email, Ip: ip, Since: s.Now().Add(-s.Window)})
		if err != nil {
			return err
		}
		if counts.ByEmail >= int64(s.MaxFailuresPerEmail) || counts.ByIp >= int64(s.MaxFailuresPerIP) {
			return nil
		}
		ok = true
		return q.LoginFailureInsert(ctx, db.LoginFailureInsertParams{Email: email, Ip: ip})
	})
	return ok, err
}

// fail audits a failed sign-in, whose attempt is already counted.
func (s *Service) fail(ctx context.Context, q *db.Queries, u *db.User, c Credentials, reason string) error {
	if err := auditFailure(ctx, q, u, c.Email, c.IP, reason); err != nil {
		return err
	}
	return ErrBadCredentials
}

// auditFailure records a wrong password (or unknown or deactivated user):
// each attempt the lockout counts is one auth.login_failed.
func auditFailure(ctx context.Context, q *db.Queries, u *db.User, email, ip, reason string) error {
	e := audit.Entry{Action: "auth.login_failed", TargetType: "user", Details: map[string]any{"email": email, "reason": reason}}
	if u != nil {
		e.OrgID, e.TargetID = u.OrgID, u.ID.String()
	}
	return audit.Record(ctx, q, audit.Actor{Kind: "anonymous", Label: email, IP: ip}, e)
}

// Prune deletes sign-in failures older than the lockout window and
// expired sessions.
func (s *Service) Prune(ctx context.Context) error {
	q := db.New(s.Pool)
	if err := q.LoginFailureDeleteExpired(ctx, s.Now().Add(-s.Window).Add(-time.Hour)); err != nil {
		return err
	}
	return q.SessionDeleteExpired(ctx, s.Now())
}
