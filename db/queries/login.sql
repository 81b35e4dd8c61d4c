-- name: LoginFailureInsert :exec
INSERT INTO login_failures (email, ip) VALUES (lower(@email::text), @ip);

-- name: LoginFailureCounts :one
SELECT
    (SELECT count(*) FROM login_failures f WHERE lower(f.email) = lower(@email::text) AND f.created_at > @since)::bigint AS by_email,
    (SELECT count(*) FROM login_failures f WHERE f.ip = @ip AND f.created_at > @since)::bigint AS by_ip;

-- name: LoginFailureClear :exec
DELETE FROM login_failures WHERE lower(email) = lower(@email::text);

-- name: LoginFailurePrune :exec
DELETE FROM login_failures WHERE created_at < @before;
