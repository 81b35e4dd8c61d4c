package imports

import (
	"context"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
)

// Abandon fails a run whose job was given up while it ran (its worker
// died on the job's last attempt) and removes its upload. Nothing of it
// was stored: a run stores its records in one transaction. A run that
// already has an outcome is left alone.
func (s *Service) Abandon(ctx context.Context, orgID, runID uuid.UUID, reason string) error {
	run, err := s.GetRun(ctx, orgID, runID)
	if err != nil {
		return err
	}
	if run.Status != StatusQueued && run.Status != StatusRunning {
		return nil
	}
	if err := s.Q.ImportRunUpdateFinished(ctx, db.ImportRunUpdateFinishedParams{OrgID: orgID, ID: runID, Status: StatusFailed,
		SkipReasons: []byte("{}"), Error: reason}); err != nil {
		return err
	}
	s.discard(ctx, UploadKey(orgID, runID))
	return nil
}
