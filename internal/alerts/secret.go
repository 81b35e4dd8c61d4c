package alerts

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
)

// errNoKey is a webhook secret to make or open by a service built without
// the key that seals them.
var errNoKey = errors.New("alerts: no key to seal webhook secrets (CURATE_SECRET_KEY)")

// secretBinding is the associated data a webhook secret is sealed with: it
// names the column as well as the organisation, so that neither another
// organisation's secret nor the same organisation's Langfuse secret key,
// copied into the row, opens.
func secretBinding(orgID uuid.UUID) []byte {
	return append([]byte("alert_settings.webhook_secret\x00"), orgID[:]...)
}

func hasSecret(row db.AlertSetting) bool {
	return row.WebhookSecretCiphertext != nil || row.WebhookSecret != ""
}

// load returns an organisation's settings, the defaults when it has none,
// with the stored row (its webhook secret). A secret stored in the clear
// before migration 00014 is sealed on the way: SQL has no key to do it
// with, and the periodic evaluation reads every organisation's settings
// through here, so none stays in the clear for long after an upgrade.
func (s *Service) load(ctx context.Context, q *db.Queries, orgID uuid.UUID) (Settings, db.AlertSetting, error) {
	row, err := q.AlertSettingsGet(ctx, orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Defaults(), db.AlertSetting{OrgID: orgID}, nil
	}
	if err != nil {
		return Settings{}, row, err
	}
	if row.WebhookSecret != "" && s.Secrets != nil {
		ct, nonce, err := s.Secrets.Seal(row.WebhookSecret, secretBinding(orgID))
		if err != nil {
			return Settings{}, row, err
		}
		if err := q.AlertSettingsUpdateSealedSecret(ctx, db.AlertSettingsUpdateSealedSecretParams{
			OrgID: orgID, Ciphertext: ct, Nonce: nonce, Plaintext: row.WebhookSecret}); err != nil {
			return Settings{}, row, err
		}
		// Read again: another server may have sealed or replaced it first.
		if row, err = q.AlertSettingsGet(ctx, orgID); err != nil {
			return Settings{}, row, err
		}
	}
	return fromRow(row), row, nil
}

// secret opens an organisation's webhook signing secret; "" when it has
// none. A secret still in the clear is only ever met by a service without
// the key, which could not seal it.
func (s *Service) secret(row db.AlertSetting) (string, error) {
	if row.WebhookSecretCiphertext == nil {
		return row.WebhookSecret, nil
	}
	if s.Secrets == nil {
		return "", errNoKey
	}
	return s.Secrets.Open(row.WebhookSecretCiphertext, row.WebhookSecretNonce, secretBinding(row.OrgID))
}
