package pairs

import (
	"context"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// ImportPair is a pair read from a file (package imports reads them), in
// the shape an import stores it.
type ImportPair struct {
	Input
	// ExternalID identifies the pair in its source ("hh-rlhf:…",
	// "oasst:…"), so a second import of the same data is recognised; empty
	// where the source has none, and the content hash recognises it.
	ExternalID string
	// ChosenExternalID and RejectedExternalID are the feedback items the
	// replies are, where the source names them (OASST): the pair links to
	// them when they were imported.
	ChosenExternalID   string
	RejectedExternalID string
}

// Check validates the pair and settles its defaults (see Input.Validate).
// A pair that is well formed but cannot be a pair, with an empty reply or
// two replies of the same text, is no error: Check returns why it is
// skipped, for the import to report.
func (p *ImportPair) Check() (skip string, err error) {
	v := &errs.Invalid{}
	p.Validate(v, "")
	if !v.Has() {
		return "", nil
	}
	if reason, ok := skippable(v); ok {
		return reason, nil
	}
	return "", v
}

// skippable tells a pair that is well-formed but cannot be a pair (an empty
// reply, or two equal replies) from a malformed one.
func skippable(v *errs.Invalid) (string, bool) {
	for _, e := range v.Errors {
		empty := e.Message == "is required" && (e.Field == "chosen_response" || e.Field == "rejected_response")
		same := e.Field == "rejected_response" && strings.HasPrefix(e.Message, "is the same text")
		if !empty && !same {
			return "", false
		}
	}
	f := v.Errors[0]
	if f.Message == "is required" {
		return "empty " + strings.TrimSuffix(f.Field, "_response") + " reply", true
	}
	return "chosen and rejected replies are the same text", true
}

// ImportBatchTx stores checked pairs with method "import" in the caller's
// transaction, so that a whole file's batches commit together or not at
// all. Pairs already stored (the same content, or the same external id)
// are left out. It returns how many it stored, and the ids of the stored
// pairs the batch holds, whether stored now or before.
func (s *Service) ImportBatchTx(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, annotator uuid.NullUUID, batch []ImportPair) (int, []uuid.UUID, error) {
	var p db.PairInsertManyParams
	for _, in := range batch {
		add(&p, in.Input, *in.Strength, "", "", in.ChosenExternalID, in.RejectedExternalID, in.ExternalID)
	}
	p.OrgID, p.Method, p.AnnotatorID, p.Tags = orgID, db.PairMethodImport, annotator, []string{}
	q := db.New(tx)
	n, err := q.PairInsertMany(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	ids, err := q.PairListIDsByIdentity(ctx, db.PairListIDsByIdentityParams{OrgID: orgID, ContentHashes: p.ContentHashes, ExternalIds: p.ExternalIds})
	if err != nil {
		return 0, nil, err
	}
	return int(n), ids, nil
}
