package models

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/serving"
)

// Lineage is where a version came from: the dataset version it was trained
// on (with its hash and counts), how many items came from each source, and
// the first items, each traced to its feedback item.
type Lineage struct {
	Dataset *db.DatasetVersionGetForModelRow // nil for a version registered by hand
	Sources []Source
	Items   []TrainingItem
}

// Source is how many items of the training data came from one source.
type Source struct {
	Kind      string // "feedback" or "pair"
	Source    string // feedback: api, langfuse, file, ui; pair: its method
	Corrected bool   // feedback with a curator's correction
	Count     int
}

// TrainingItem is one item a version was trained on.
type TrainingItem struct {
	SourceID   uuid.UUID // the feedback item or pair in the dataset
	IsFeedback bool
	Query      string
	Split      string
	FeedbackID uuid.UUID // the feedback it came from; Nil when unknown
}

// MaxLineageItems is how many training items a version's page lists.
const MaxLineageItems = 10

// Lineage traces a version back to the data and feedback that trained it.
func (s *Service) Lineage(ctx context.Context, orgID uuid.UUID, v Version) (Lineage, error) {
	var out Lineage
	if v.DatasetVersionID == nil {
		return out, nil
	}
	q := db.New(s.Pool)
	dv, err := q.DatasetVersionGetForModel(ctx, db.DatasetVersionGetForModelParams{OrgID: orgID, ID: *v.DatasetVersionID})
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.Dataset = &dv
	sources, err := q.ModelVersionCountTrainingSources(ctx, db.ModelVersionCountTrainingSourcesParams{OrgID: orgID, VersionID: dv.ID})
	if err != nil {
		return out, err
	}
	for _, r := range sources {
		out.Sources = append(out.Sources, Source{Kind: r.Kind, Source: r.Source, Corrected: r.Corrected, Count: int(r.N)})
	}
	items, err := q.ModelVersionListTrainingItems(ctx, db.ModelVersionListTrainingItemsParams{OrgID: orgID, VersionID: dv.ID, RowLimit: MaxLineageItems})
	if err != nil {
		return out, err
	}
	for _, r := range items {
		out.Items = append(out.Items, TrainingItem{SourceID: r.SourceID, IsFeedback: r.IsFeedback, Query: r.Query, Split: r.Split, FeedbackID: r.FeedbackID})
	}
	return out, nil
}

// Trained is a version trained on data holding a feedback item, with the
// aliases that serve it now.
type Trained struct {
	VersionID     uuid.UUID
	Name          string
	Version       string
	Status        string
	DatasetID     uuid.UUID
	DatasetName   string
	DatasetNumber int
	Aliases       []string
}

// TrainedOn lists the versions trained on data holding a feedback item,
// directly or through a pair built from it: where the item went.
func (s *Service) TrainedOn(ctx context.Context, orgID, feedbackID uuid.UUID) ([]Trained, error) {
	q := db.New(s.Pool)
	rows, err := q.ModelVersionListByFeedback(ctx, db.ModelVersionListByFeedbackParams{OrgID: orgID, FeedbackID: feedbackID})
	if err != nil {
		return nil, err
	}
	out := make([]Trained, 0, len(rows))
	for _, r := range rows {
		v, err := s.Get(ctx, orgID, r.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, Trained{VersionID: r.ID, Name: r.Name, Version: r.Version, Status: string(r.Status),
			DatasetID: r.DatasetID, DatasetName: r.DatasetName, DatasetNumber: int(r.DatasetNumber), Aliases: v.Aliases})
	}
	return out, nil
}

// Models lists the organisation's registered models by name.
func (s *Service) Models(ctx context.Context, orgID uuid.UUID) ([]db.RegisteredModel, error) {
	return db.New(s.Pool).RegisteredModelList(ctx, orgID)
}

// Targets lists the serving targets versions can be deployed to.
func (s *Service) Targets(ctx context.Context, orgID uuid.UUID) ([]serving.Target, error) {
	return s.Serving.List(ctx, orgID)
}

// ByJob returns the version a fine-tuning job registered; false when it
// registered none (it has not succeeded, or it ended before the registry).
func (s *Service) ByJob(ctx context.Context, orgID, jobID uuid.UUID) (Version, bool, error) {
	v, err := db.New(s.Pool).ModelVersionGetByJob(ctx, db.ModelVersionGetByJobParams{OrgID: orgID, FineTuningJobID: uuid.NullUUID{UUID: jobID, Valid: true}})
	if errors.Is(err, pgx.ErrNoRows) {
		return Version{}, false, nil
	}
	if err != nil {
		return Version{}, false, err
	}
	out, err := s.Get(ctx, orgID, v.ID)
	return out, err == nil, err
}
