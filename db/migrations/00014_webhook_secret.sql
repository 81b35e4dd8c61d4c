-- +goose Up
-- An alert webhook's signing secret is sealed with CURATE_SECRET_KEY, as
-- the Langfuse secret key is (package secrets), and bound to its
-- organisation. SQL has no key to encrypt with, so a secret stored before
-- this migration stays in webhook_secret until the application reads it:
-- it then seals it into the new columns and empties webhook_secret. The
-- alert evaluation reads every organisation's settings every five minutes,
-- so no secret stays in the clear past the first evaluation after the
-- upgrade. (Rotating every secret instead would break each receiver until
-- its admin copied the new one.)
ALTER TABLE alert_settings
    ADD COLUMN webhook_secret_ciphertext bytea,
    ADD COLUMN webhook_secret_nonce      bytea,
    ADD CONSTRAINT alert_settings_webhook_secret_sealed
        CHECK ((webhook_secret_ciphertext IS NULL) = (webhook_secret_nonce IS NULL));
COMMENT ON COLUMN alert_settings.webhook_secret IS
    'a secret stored in the clear before migration 00014; sealed into webhook_secret_ciphertext and emptied on first read';

-- Why the last try to deliver an alert to the webhook failed, in words fit
-- for a page (never what the receiver answered); empty when it did not.
ALTER TABLE alerts ADD COLUMN webhook_error text NOT NULL DEFAULT '';

-- +goose Down
-- Sealed secrets cannot be opened in SQL: they are dropped, and admins make
-- new ones on the alert settings page.
ALTER TABLE alerts DROP COLUMN webhook_error;
ALTER TABLE alert_settings DROP CONSTRAINT alert_settings_webhook_secret_sealed,
    DROP COLUMN webhook_secret_ciphertext, DROP COLUMN webhook_secret_nonce;
