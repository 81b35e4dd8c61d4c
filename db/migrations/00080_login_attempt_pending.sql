-- +goose Up
-- A sign-in whose password is being checked is reserved as pending; only a
-- checked, wrong password (pending false) counts towards the lockout, so
-- correct sign-ins at once do not lock each other out. A pending row older
-- than the check could take (its process died) counts as a failure.
ALTER TABLE login_failures ADD COLUMN pending boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE login_failures DROP COLUMN pending;
