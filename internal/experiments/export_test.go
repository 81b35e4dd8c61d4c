package experiments

import (
	"context"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
)

// KeptAndRead are an experiment's moments and incidents twice: summed from
// the units' kept values once they are brought up to date, and read from
// its answers by ExperimentListMetricMoments and ExperimentCountIncidents.
func (s *Service) KeptAndRead(ctx context.Context, orgID uuid.UUID, key string) (kept, read []db.ExperimentListMetricMomentsRow,
	keptIncidents, readIncidents []db.ExperimentCountIncidentsRow, err error) {
	q := db.New(s.Pool)
	e, err := q.ExperimentGetByKey(ctx, db.ExperimentGetByKeyParams{OrgID: orgID, Key: key})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if err := s.foldFor(ctx, e); err != nil {
		return nil, nil, nil, nil, err
	}
	if kept, keptIncidents, err = keptMoments(ctx, q, e); err != nil {
		return nil, nil, nil, nil, err
	}
	if read, err = q.ExperimentListMetricMoments(ctx, db.ExperimentListMetricMomentsParams{OrgID: orgID, ExperimentID: e.ID, Phase: e.Phase,
		Since: e.PhaseStartedAt, PreDays: e.CupedDays}); err != nil {
		return nil, nil, nil, nil, err
	}
	readIncidents, err = q.ExperimentCountIncidents(ctx, db.ExperimentCountIncidentsParams{OrgID: orgID, ExperimentID: e.ID, Phase: e.Phase,
		Since: e.PhaseStartedAt})
	return kept, read, keptIncidents, readIncidents, err
}
