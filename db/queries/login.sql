-- name: LoginFailureInsert :exec
INSERT INTO login_failures (email, ip) VALUES (lower(@email::text), @ip);

-- name: LoginFailureCount :one
SELECT
    (SELECT count(*) FROM login_failures f WHERE lower(f.email) = lower(@email::text) AND f.created_at > @since)::bigint AS by_email,
    (SELECT count(*) FROM login_failures f WHERE f.ip = @ip AND f.created_at > @since)::bigint AS by_ip;

-- name: LoginFailureDelete :exec
DELETE FROM login_failures WHERE lower(email) = lower(@email::text);

-- name: LoginFailureDeleteExpired :exec
DELETE FROM login_failures WHERE created_at < @before;

-- name: LoginFailureGetForUpdate :exec
-- Holds one e-mail address's and one client address's failures still until
-- the transaction ends, so that counting them and adding an attempt cannot
-- interleave with another sign-in. Advisory locks, because there may be no
-- row yet to lock; always taken in this order (e-mail, then address), so
-- two attempts cannot deadlock.
SELECT pg_advisory_xact_lock(1, hashtext(lower(@email::text))), pg_advisory_xact_lock(2, hashtext(@ip::text));
