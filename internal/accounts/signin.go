package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	at, err := s.reserveAttempt(ctx, c.Email, c.IP)
	if err != nil {
		return Session{}, err
	}
	if at == nil {
		auth.DummyVerify(c.Password)
		_ = audit.Record(ctx, q, audit.Actor{Kind: "anonymous", Label: c.Email, IP: c.IP},
			audit.Entry{Action: "auth.login_locked", TargetType: "user", Details: map[string]any{"email": c.Email}})
		return Session{}, s.tooMany()
	}
	// The attempt ends as a failure or a success whether or not the client
	// waits for it: one that hangs up cannot leave a check uncounted.
	ctx = context.WithoutCancel(ctx)
	defer at.release(ctx)

	u, err := q.UserGetByEmail(ctx, c.Email)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		auth.DummyVerify(c.Password)
		return Session{}, s.fail(ctx, q, at, nil, c, "unknown e-mail")
	case err != nil:
		return Session{}, err
	}
	ok, err := auth.VerifyPassword(u.PasswordHash, c.Password)
	if err != nil {
		return Session{}, err
	}
	if !ok {
		return Session{}, s.fail(ctx, q, at, &u, c, "wrong password")
	}
	if !u.Active {
		return Session{}, s.fail(ctx, q, at, &u, c, "deactivated")
	}
	var sess Session
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		// Success takes back the attempt with the account's earlier failures.
		if err := q.LoginFailureDelete(ctx, db.LoginFailureDeleteParams{Email: c.Email, Attempt: at.id}); err != nil {
			return err
		}
		if sess, err = s.startSession(ctx, q, u, c.IP, c.UserAgent); err != nil {
			return err
		}
		return audit.Record(ctx, q, audit.Actor{Kind: "user", ID: u.ID, Label: u.Email, IP: c.IP},
			audit.Entry{OrgID: u.OrgID, Action: "auth.login", TargetType: "user", TargetID: u.ID.String()})
	})
	if err == nil {
		at.settled = true
	}
	return sess, err
}

func (s *Service) tooMany() error {
	return &errs.TooMany{
		Message:    fmt.Sprintf("too many failed sign-ins: try again in %d minutes", int(s.Window.Minutes())),
		RetryAfter: s.Window,
	}
}

// pendingFor is how long an attempt may stay pending (its password being
// checked) before the lockout counts it as a failure: the check of an
// attempt whose process died never ends.
const pendingFor = 30 * time.Second

// attempt is a sign-in reserved while its password is checked: a pending
// row of login_failures until it is confirmed as a failure or deleted by
// the success.
type attempt struct {
	pool    *pgxpool.Pool
	id      int64
	settled bool
}

// release takes back an attempt that ended in neither a failure nor a
// success (an error on the way): it is no evidence either way.
func (a *attempt) release(ctx context.Context) {
	if !a.settled {
		_ = db.New(a.pool).LoginFailureDeleteAttempt(ctx, a.id)
	}
}

// reserveAttempt reserves a password check for the e-mail and the address,
// or answers nil when either is at its limit of failures. Only checked
// failures count; while attempts still being checked could take the last
// places, it waits for them to end, so that parallel attempts cannot all
// see room for one more: exactly the limit's worth of wrong passwords is
// ever checked, and correct ones at once all get theirs. Counting and
// reserving happen under locks on the e-mail and the address.
func (s *Service) reserveAttempt(ctx context.Context, email, ip string) (*attempt, error) {
	wait := 20 * time.Millisecond
	for {
		var at *attempt
		full := false
		err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
			if err := q.LoginFailureGetForUpdate(ctx, db.LoginFailureGetForUpdateParams{Email: email, Ip: ip}); err != nil {
				return err
			}
			now := s.Now()
			n, err := q.LoginFailureCount(ctx, db.LoginFailureCountParams{Email: email, Ip: ip, Since: now.Add(-s.Window), Stale: now.Add(-pendingFor)})
			if err != nil {
				return err
			}
			maxEmail, maxIP := int64(s.MaxFailuresPerEmail), int64(s.MaxFailuresPerIP)
			switch {
			case n.ByEmail >= maxEmail || n.ByIp >= maxIP:
				full = true
				return nil
			case n.ByEmail+n.PendingByEmail >= maxEmail || n.ByIp+n.PendingByIp >= maxIP:
				return nil // wait for the checks in flight
			}
			id, err := q.LoginFailureInsertPending(ctx, db.LoginFailureInsertPendingParams{Email: email, Ip: ip})
			at = &attempt{pool: s.Pool, id: id}
			return err
		})
		switch {
		case err != nil:
			return nil, err
		case full:
			return nil, nil
		case at != nil:
			return at, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// fail audits a failed sign-in and counts its attempt.
func (s *Service) fail(ctx context.Context, q *db.Queries, at *attempt, u *db.User, c Credentials, reason string) error {
	if err := q.LoginFailureUpdateConfirmed(ctx, at.id); err != nil {
		return err
	}
	at.settled = true
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
