package demo

import (
	"context"
	"fmt"
	"net/url"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
)

// DatasetName is the demo's instruction-tuning dataset.
const DatasetName = "Tandem support answers (demo)"

// SeedDataset gives the demo organisation one frozen version to fine-tune
// on: an instruction-tuning dataset of every approved and corrected demo
// answer, marked ready. It does so only while the organisation has no
// dataset, archived ones included, so a later start, or a curator who
// renamed or archived it, is left alone; a demo dataset left unfrozen by an
// interrupted start is finished. It returns the version made, or a zero
// version when it made none.
func (s *Seeder) SeedDataset(ctx context.Context, orgID uuid.UUID) (db.DatasetVersion, error) {
	svc := s.datasets
	id, err := unfinished(ctx, svc, orgID)
	if err != nil || id == uuid.Nil {
		return db.DatasetVersion{}, err
	}
	// An empty filter matches every item; only approved and corrected ones
	// become members.
	if _, err := svc.AddByFilter(ctx, audit.System, orgID, id, url.Values{}); err != nil {
		return db.DatasetVersion{}, fmt.Errorf("demo dataset members: %w", err)
	}
	v, err := svc.Freeze(ctx, audit.System, orgID, id)
	if err != nil {
		return db.DatasetVersion{}, fmt.Errorf("demo dataset version: %w", err)
	}
	return v, nil
}

// unfinished returns the demo dataset still to be filled and frozen: a new
// one in an organisation without datasets, the one an interrupted start
// left, or uuid.Nil when there is nothing to do.
func unfinished(ctx context.Context, svc *datasets.Service, orgID uuid.UUID) (uuid.UUID, error) {
	live, _, err := svc.List(ctx, orgID, datasets.ListFilter{}, nil, 2)
	if err != nil {
		return uuid.Nil, fmt.Errorf("demo dataset: %w", err)
	}
	archived, _, err := svc.List(ctx, orgID, datasets.ListFilter{Status: datasets.StatusArchived}, nil, 1)
	if err != nil {
		return uuid.Nil, fmt.Errorf("demo dataset: %w", err)
	}
	switch {
	case len(live) == 1 && len(archived) == 0:
		d := live[0].TrainingDataset
		if d.Name == DatasetName && !d.CurrentVersionID.Valid &&
			(d.Status == datasets.StatusDraft || d.Status == datasets.StatusCurating) {
			return d.ID, nil
		}
		return uuid.Nil, nil
	case len(live) > 0 || len(archived) > 0:
		return uuid.Nil, nil
	}
	d, err := svc.Create(ctx, audit.System, orgID, datasets.NewDataset{
		Type: datasets.TypeInstructionTuning,
		Settings: datasets.Settings{
			Name:              DatasetName,
			Description:       "Reviewed answers of the demo support assistant: approved ones as given, weak ones as the curator corrected them.",
			SystemPrompt:      "You are the support assistant of Tandem, a shared team calendar. Answer briefly and precisely.",
			ValidationPercent: 10,
		},
	})
	if err != nil {
		return uuid.Nil, fmt.Errorf("demo dataset: %w", err)
	}
	return d.ID, nil
}
