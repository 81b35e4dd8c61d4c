package datasets

import (
	"context"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/keyset"
)

// ListObjects returns a page of datasets each in the shape GET /:id shows
// it (without its versions and exports): with its current version and the
// address of its newest finished export.
func (s *Service) ListObjects(ctx context.Context, orgID uuid.UUID, f ListFilter, cursor *keyset.Cursor, limit int) ([]Object, *keyset.Cursor, error) {
	rows, next, err := s.List(ctx, orgID, f, cursor, limit)
	if err != nil || len(rows) == 0 {
		return []Object{}, nil, err
	}
	var versionIDs, datasetIDs []uuid.UUID
	for _, r := range rows {
		datasetIDs = append(datasetIDs, r.TrainingDataset.ID)
		if r.TrainingDataset.CurrentVersionID.Valid {
			versionIDs = append(versionIDs, r.TrainingDataset.CurrentVersionID.UUID)
		}
	}
	q := db.New(s.Pool)
	versions, err := q.DatasetVersionListByIDs(ctx, db.DatasetVersionListByIDsParams{OrgID: orgID, Ids: versionIDs})
	if err != nil {
		return nil, nil, err
	}
	exports, err := q.ExportListLatestSucceeded(ctx, db.ExportListLatestSucceededParams{OrgID: orgID, DatasetIds: datasetIDs})
	if err != nil {
		return nil, nil, err
	}
	versionByID := make(map[uuid.UUID]*db.DatasetVersion, len(versions))
	for i := range versions {
		versionByID[versions[i].ID] = &versions[i]
	}
	exportOf := make(map[uuid.UUID][]db.DatasetExport, len(exports))
	for _, e := range exports {
		exportOf[e.DatasetID] = []db.DatasetExport{e}
	}
	out := make([]Object, len(rows))
	for i, r := range rows {
		d := r.TrainingDataset
		out[i] = ToObject(d, int(r.MemberCount), versionByID[d.CurrentVersionID.UUID], exportOf[d.ID])
	}
	return out, next, nil
}
