package datasets

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/pii"
	"github.com/curate/curate/internal/validate"
)

// ReportRequest chooses what a validation report checks.
type ReportRequest struct {
	Format  string // "" for the dataset's target format
	MaskPII bool   // check the examples as an export with this setting writes them
}

// Report is a validation report and what it was run on.
type Report struct {
	*validate.Report
	// Source says what was checked: a frozen version, or the members as
	// they are now (before the first freeze, or while curating again).
	Source  string
	Version *db.DatasetVersion
}

// Report validates a dataset for a format: its current version when it is
// ready or exported, its members as they are now otherwise. Examples are
// checked as the export writes them: with PII masked when MaskPII is set,
// and otherwise with PII reported as warnings. Reading a report changes
// nothing; an export records the score it was checked with.
func (s *Service) Report(ctx context.Context, orgID, id uuid.UUID, req ReportRequest) (Report, error) {
	d, err := s.Get(ctx, orgID, id)
	if err != nil {
		return Report{}, err
	}
	format := req.Format
	if format == "" {
		format = d.Dataset.ExportFormat
	}
	f, err := export.ParseFormat(format)
	if err != nil {
		return Report{}, errs.InvalidField("format", "%v", err)
	}
	q := db.New(s.Pool)
	if d.Current != nil && (d.Dataset.Status == StatusReady || d.Dataset.Status == StatusExported) {
		out, err := validateVersion(ctx, q, *d.Current, f, d.Dataset.BaseModel, req.MaskPII)
		out.Source = fmt.Sprintf("version %d (frozen, %s)", d.Current.Number, short(d.Current.ContentHash))
		return out, err
	}
	v, addEx, err := newValidator(f, d.Dataset.BaseModel, KindOf(string(d.Dataset.DatasetType)), req.MaskPII)
	if err != nil {
		return Report{}, err
	}
	if err := eachMember(ctx, q, d.Dataset, func(_ uuid.UUID, e Example) error { addEx(e); return nil }); err != nil {
		return Report{}, err
	}
	return Report{Report: v.Report(), Source: "the current members (not frozen yet)"}, nil
}

// newValidator returns a validator for the format and a function adding
// an example to it as the export writes it.
func newValidator(f export.Format, baseModel, kind string, maskPII bool) (*validate.Validator, func(Example), error) {
	opts := validate.Options{Format: f, BaseModel: baseModel}
	if !maskPII {
		opts.PIIDetector = pii.Kinds
	}
	v, err := validate.New(opts)
	if err != nil {
		return nil, nil, err
	}
	return v, func(e Example) {
		if maskPII {
			e = e.Masked()
		}
		if kind == KindPreference {
			v.AddPref(e.Pref())
		} else {
			v.AddSFT(e.SFT())
		}
	}, nil
}

// validateVersion is the report on a frozen version in a format.
func validateVersion(ctx context.Context, q *db.Queries, ver db.DatasetVersion, f export.Format, baseModel string, maskPII bool) (Report, error) {
	v, addEx, err := newValidator(f, baseModel, ver.Kind, maskPII)
	if err != nil {
		return Report{}, err
	}
	for _, split := range Splits {
		if err := eachVersionItem(ctx, q, ver.ID, split, func(e Example) error { addEx(e); return nil }); err != nil {
			return Report{}, err
		}
	}
	return Report{Report: v.Report(), Version: &ver, Source: fmt.Sprintf("version %d", ver.Number)}, nil
}

// eachVersionItem calls fn with every item of one split of a version, in
// canonical order, reading a keyset page at a time.
func eachVersionItem(ctx context.Context, q *db.Queries, versionID uuid.UUID, split string, fn func(Example) error) error {
	p := db.DatasetVersionItemListParams{VersionID: versionID, Split: split, AfterSha: []byte{}, AfterID: uuid.Nil, RowLimit: readPage}
	for {
		rows, err := q.DatasetVersionItemList(ctx, p)
		if err != nil {
			return err
		}
		for _, r := range rows {
			var e Example
			if err := json.Unmarshal(r.Content, &e); err != nil {
				return fmt.Errorf("version item %x: %w", r.ContentSha, err)
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		if len(rows) < readPage {
			return nil
		}
		last := rows[len(rows)-1]
		p.AfterSha, p.AfterID = last.ContentSha, last.SourceID
	}
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
