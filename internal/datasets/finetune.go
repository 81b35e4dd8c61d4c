package datasets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"gocloud.dev/blob/fileblob"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/validate"
)

// FineTuneSource gives fine-tuning the organisation's frozen versions and
// writes a version's files for a launch, with PII masked as exports are by
// default.
type FineTuneSource struct {
	Service *Service
	// A version never changes, so its verdict is worked out once.
	verdicts sync.Map // version id → verdict
}

type verdict struct {
	valid   bool
	problem string
}

var _ finetune.DataSource = (*FineTuneSource)(nil)

// Versions lists the frozen versions, newest first.
func (s *FineTuneSource) Versions(ctx context.Context, orgID uuid.UUID) ([]finetune.Version, error) {
	rows, err := db.New(s.Service.Pool).DatasetVersionListForOrg(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]finetune.Version, len(rows))
	for i, r := range rows {
		out[i] = finetune.Version{ID: r.ID, Label: fmt.Sprintf("%s v%d", r.DatasetName, r.Number), Kind: exportKind(r.Kind),
			Examples: int(r.ItemCount), Valid: true}
	}
	return out, nil
}

// Version describes one version, with its validation verdict.
func (s *FineTuneSource) Version(ctx context.Context, orgID, versionID uuid.UUID) (finetune.Version, error) {
	q := db.New(s.Service.Pool)
	v, err := q.DatasetVersionGet(ctx, db.DatasetVersionGetParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return finetune.Version{}, errs.NotFound(err)
	}
	row, err := q.DatasetGet(ctx, db.DatasetGetParams{OrgID: orgID, ID: v.DatasetID})
	if err != nil {
		return finetune.Version{}, err
	}
	d := row.TrainingDataset
	verd, err := s.verdict(ctx, q, v, d)
	if err != nil {
		return finetune.Version{}, err
	}
	return finetune.Version{ID: v.ID, DatasetID: d.ID, BaseModel: d.BaseModel, Label: fmt.Sprintf("%s v%d", d.Name, v.Number),
		Kind: exportKind(v.Kind), Examples: int(v.ItemCount), Valid: verd.valid, Problem: verd.problem}, nil
}

// Latest describes the dataset's newest frozen version.
func (s *FineTuneSource) Latest(ctx context.Context, orgID, datasetID uuid.UUID) (finetune.Version, error) {
	q := db.New(s.Service.Pool)
	if _, err := q.DatasetGet(ctx, db.DatasetGetParams{OrgID: orgID, ID: datasetID}); err != nil {
		return finetune.Version{}, errs.NotFound(err)
	}
	v, err := q.DatasetVersionGetLatest(ctx, datasetID)
	if errors.Is(err, pgx.ErrNoRows) {
		return finetune.Version{}, finetune.ErrNoFrozenVersion
	}
	if err != nil {
		return finetune.Version{}, err
	}
	return s.Version(ctx, orgID, v.ID)
}

// verdict validates a version as the dataset's target format takes it.
func (s *FineTuneSource) verdict(ctx context.Context, q *db.Queries, v db.DatasetVersion, d db.TrainingDataset) (verdict, error) {
	if cached, ok := s.verdicts.Load(v.ID); ok {
		return cached.(verdict), nil
	}
	f, err := export.ParseFormat(d.ExportFormat)
	if err != nil {
		return verdict{}, err
	}
	r, err := validateVersion(ctx, s.Service.Pool, v, f, d.BaseModel, true)
	if err != nil {
		return verdict{}, err
	}
	out := verdict{valid: !r.Blocking()}
	if r.Blocking() {
		var codes []string
		for _, f := range r.Findings {
			if f.Severity == validate.Error {
				codes = append(codes, fmt.Sprintf("%s ×%d", f.Code, f.Count))
			}
		}
		out.problem = strings.Join(codes, ", ")
	}
	s.verdicts.Store(v.ID, out)
	return out, nil
}

// Prepare writes the version's train and validation files in format into
// dir, as an export would (PII masked), and returns their paths.
func (s *FineTuneSource) Prepare(ctx context.Context, orgID, versionID uuid.UUID, format export.Format, dir string) (finetune.Prepared, error) {
	q := db.New(s.Service.Pool)
	v, err := q.DatasetVersionGet(ctx, db.DatasetVersionGetParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return finetune.Prepared{}, errs.NotFound(err)
	}
	bucket, err := fileblob.OpenBucket(dir, &fileblob.Options{NoTempDir: true})
	if err != nil {
		return finetune.Prepared{}, err
	}
	defer bucket.Close()
	m, err := WriteFiles(ctx, s.Service.Pool, bucket, s.Service.Scratch, "", v, format, true, nil)
	if err != nil {
		return finetune.Prepared{}, err
	}
	p := finetune.Prepared{TrainPath: dir + "/train" + format.Ext(), TrainExamples: m.Counts["train"]}
	if m.Counts["validation"] > 0 {
		p.ValidPath = dir + "/validation" + format.Ext()
	}
	return p, nil
}

// Tagged counts the version's training items and gives the last user
// message of those whose feedback or pair carries tag, as stored (before
// the PII masking of the files a job trains on).
func (s *FineTuneSource) Tagged(ctx context.Context, orgID, versionID uuid.UUID, tag string) (prompts []string, total int, err error) {
	rows, err := db.New(s.Service.Pool).GoldenSetListItems(ctx, db.GoldenSetListItemsParams{OrgID: orgID, VersionID: versionID})
	if err != nil {
		return nil, 0, err
	}
	for _, r := range rows {
		if r.Split != "train" {
			continue
		}
		total++
		if !slices.Contains(r.Tags, tag) {
			continue
		}
		var ex Example
		if err := json.Unmarshal(r.Content, &ex); err != nil {
			return nil, 0, fmt.Errorf("version item %s: %w", r.SourceID, err)
		}
		msgs := ex.Messages
		if len(ex.Prompt) > 0 {
			msgs = ex.Prompt
		}
		prompts = append(prompts, export.LastUser(msgs))
	}
	return prompts, total, nil
}

func exportKind(kind string) export.Kind { return export.Kind(kind) }
