-- name: LoginFailureInsert :exec
INSERT INTO login_failures (email, ip) VALUES (lower(@email::text), @ip);

-- name: LoginFailureInsertPending :one
-- An attempt whose password is about to be checked, pending until
-- LoginFailureUpdateConfirmed makes it a failure or a success deletes it.
INSERT INTO login_failures (email, ip, pending) VALUES (lower(@email::text), @ip, true) RETURNING id;

-- name: LoginFailureUpdateConfirmed :exec
UPDATE login_failures SET pending = false WHERE id = @id;

-- name: LoginFailureDeleteAttempt :exec
DELETE FROM login_failures WHERE id = @id;

-- name: LoginFailureCount :one
-- The failures since @since (a pending attempt from before @stale counts as
-- one: its check never ended) and the attempts still being checked.
SELECT
    (SELECT count(*) FROM login_failures f WHERE lower(f.email) = lower(@email::text) AND f.created_at > @since
        AND (NOT f.pending OR f.created_at <= @stale))::bigint AS by_email,
    (SELECT count(*) FROM login_failures f WHERE f.ip = @ip AND f.created_at > @since
        AND (NOT f.pending OR f.created_at <= @stale))::bigint AS by_ip,
    (SELECT count(*) FROM login_failures f WHERE lower(f.email) = lower(@email::text) AND f.pending AND f.created_at > @stale)::bigint AS pending_by_email,
    (SELECT count(*) FROM login_failures f WHERE f.ip = @ip AND f.pending AND f.created_at > @stale)::bigint AS pending_by_ip;

-- name: LoginFailureDelete :exec
-- A success clears the account's failures and its own attempt, not the
-- attempts of other sign-ins still being checked.
DELETE FROM login_failures WHERE lower(email) = lower(@email::text) AND (NOT pending OR id = @attempt);

-- name: LoginFailureDeleteExpired :exec
DELETE FROM login_failures WHERE created_at < @before;

-- name: LoginFailureGetForUpdate :exec
-- Holds one e-mail address's and one client address's failures still until
-- the transaction ends, so that counting them and adding an attempt cannot
-- interleave with another sign-in. Advisory locks, because there may be no
-- row yet to lock; always taken in this order (e-mail, then address), so
-- two attempts cannot deadlock.
SELECT pg_advisory_xact_lock(1, hashtext(lower(@email::text))), pg_advisory_xact_lock(2, hashtext(@ip::text));
