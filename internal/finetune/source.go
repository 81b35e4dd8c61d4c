package finetune

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/export"
)

// DataSource is what fine-tuning needs from the frozen dataset versions:
// a list to choose from and their examples written as files.
type DataSource interface {
	// Versions lists the organisation's frozen versions, newest first.
	Versions(ctx context.Context, orgID uuid.UUID) ([]Version, error)
	// Version describes one version, or returns errs.ErrNotFound.
	Version(ctx context.Context, orgID, versionID uuid.UUID) (Version, error)
	// Latest describes a dataset's newest frozen version. It returns
	// errs.ErrNotFound when the organisation has no such dataset, and
	// ErrNoFrozenVersion when the dataset has not been frozen yet.
	Latest(ctx context.Context, orgID, datasetID uuid.UUID) (Version, error)
	// Prepare writes the version's training and validation examples in
	// format into dir (which exists) and returns their paths. Writing the
	// same version again gives the same bytes, so a retried step may
	// overwrite what an interrupted one left.
	Prepare(ctx context.Context, orgID, versionID uuid.UUID, format export.Format, dir string) (Prepared, error)
	// Tagged counts the version's training examples and returns the
	// prompt (the last user message) of each of them whose source carries
	// tag (a split tag such as red_team).
	Tagged(ctx context.Context, orgID, versionID uuid.UUID, tag string) (prompts []string, total int, err error)
}

// ErrNoFrozenVersion is a dataset with no frozen version to train on.
var ErrNoFrozenVersion = errors.New("the dataset has no frozen version")

// Version is a frozen dataset version as a launch sees it.
type Version struct {
	ID        uuid.UUID
	DatasetID uuid.UUID
	// BaseModel is the model the dataset is meant for ("" when it names
	// none): a launch that names no base model trains it.
	BaseModel string
	Label     string      // e.g. "support-dpo v3", shown in lists
	Kind      export.Kind // sft or preference
	Examples  int         // training and validation examples together
	// Valid is false when the version failed validation; Problem says why.
	Valid   bool
	Problem string
}

// Prepared are a version's files in one export format.
type Prepared struct {
	TrainPath     string
	ValidPath     string // "" when the version has no validation split
	TrainExamples int
}

// Versions lists the dataset versions a launch may choose from.
func (s *Service) Versions(ctx context.Context, orgID uuid.UUID) ([]Version, error) {
	src, err := s.source()
	if err != nil {
		return nil, err
	}
	return src.Versions(ctx, orgID)
}
