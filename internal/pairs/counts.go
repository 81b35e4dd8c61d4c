package pairs

import (
	"context"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
)

// MethodCounts counts the organisation's pairs by how they were made.
func (s *Service) MethodCounts(ctx context.Context, orgID uuid.UUID) ([]db.PairCountByMethodRow, error) {
	return db.New(s.Pool).PairCountByMethod(ctx, orgID)
}
