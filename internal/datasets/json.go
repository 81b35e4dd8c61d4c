package datasets

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
)

// Object is a dataset as the JSON API shows it.
type Object struct {
	ID           uuid.UUID      `json:"id"`
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	DatasetType  string         `json:"dataset_type"`
	Status       string         `json:"status"`
	SampleCount  int            `json:"sample_count"`
	QualityScore *float64       `json:"quality_score"`
	ExportFormat string         `json:"export_format"`
	ExportURL    string         `json:"export_url,omitempty"` // the newest finished export's manifest, through the app
	BaseModel    string         `json:"base_model"`
	SystemPrompt string         `json:"system_prompt"`
	Split        SplitObject    `json:"split"`
	SavedFilter  string         `json:"saved_filter,omitempty"`
	Curator      string         `json:"curator_email"`
	Current      *VersionObject `json:"current_version"`
	CreatedAt    time.Time      `json:"created_at"`
	UpdatedAt    time.Time      `json:"updated_at"`
	Version      int32          `json:"version"`
	AgreedOnly   bool           `json:"agreed_only"` // members under open or disputed overlapping review are left out
}

// SplitObject is a split configuration.
type SplitObject struct {
	Strategy          string `json:"strategy"`
	ValidationPercent int    `json:"validation_percent"`
	Seed              int64  `json:"seed"`
}

// VersionObject is a frozen version.
type VersionObject struct {
	ID              uuid.UUID   `json:"id"`
	Number          int32       `json:"number"`
	Kind            string      `json:"kind"`
	ContentHash     string      `json:"content_hash"`
	ItemCount       int32       `json:"item_count"`
	TrainCount      int32       `json:"train_count"`
	ValidationCount int32       `json:"validation_count"`
	Split           SplitObject `json:"split"`
	CreatedAt       time.Time   `json:"created_at"`
	LeftOut         LeftOut     `json:"left_out"` // members left out for agreed items only
}

// ExportObject is an export with its progress and files.
type ExportObject struct {
	ID         uuid.UUID       `json:"id"`
	VersionID  uuid.UUID       `json:"version_id"`
	Format     string          `json:"format"`
	MaskPII    bool            `json:"mask_pii"`
	Status     string          `json:"status"`
	RowsTotal  int32           `json:"rows_total"`
	RowsDone   int32           `json:"rows_done"`
	Error      string          `json:"error,omitempty"`
	Files      []FileObject    `json:"files"`
	Manifest   json.RawMessage `json:"manifest,omitempty"`
	CreatedBy  string          `json:"created_by"`
	CreatedAt  time.Time       `json:"created_at"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

// FileObject is one downloadable file.
type FileObject struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// ToObject shapes a dataset for the API. memberCount is the number of
// members; exports, when given, supply export_url.
func ToObject(d db.TrainingDataset, memberCount int, current *db.DatasetVersion, exports []db.DatasetExport) Object {
	o := Object{ID: d.ID, Name: d.Name, Description: d.Description, DatasetType: string(d.DatasetType), Status: string(d.Status),
		SampleCount: memberCount, ExportFormat: d.ExportFormat, BaseModel: d.BaseModel, SystemPrompt: d.SystemPrompt,
		Split:       SplitObject{Strategy: string(d.SplitStrategy), ValidationPercent: int(d.ValidationPercent), Seed: d.SplitSeed},
		SavedFilter: d.SavedFilter, AgreedOnly: d.AgreedOnly, Curator: d.CuratorLabel, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, Version: d.Version}
	if d.QualityScore.Valid {
		s := float64(d.QualityScore.Float32)
		o.QualityScore = &s
	}
	if current != nil {
		v := ToVersionObject(*current)
		o.Current = &v
	}
	for _, e := range exports {
		if e.Status == db.ExportStatusSucceeded {
			o.ExportURL = FileURL(e, ManifestName)
			break
		}
	}
	return o
}

// ToVersionObject shapes a version for the API.
func ToVersionObject(v db.DatasetVersion) VersionObject {
	return VersionObject{ID: v.ID, Number: v.Number, Kind: v.Kind, ContentHash: v.ContentHash, ItemCount: v.ItemCount,
		TrainCount: v.TrainCount, ValidationCount: v.ValidationCount, CreatedAt: v.CreatedAt,
		Split:   SplitObject{Strategy: string(v.SplitStrategy), ValidationPercent: int(v.ValidationPercent), Seed: v.SplitSeed},
		LeftOut: LeftOut{Disputed: int(v.LeftOutDisputed), Open: int(v.LeftOutOpen)}}
}

// ToExportObject shapes an export for the API.
func ToExportObject(e db.DatasetExport) ExportObject {
	o := ExportObject{ID: e.ID, VersionID: e.VersionID, Format: e.Format, MaskPII: e.MaskPii, Status: string(e.Status),
		RowsTotal: e.RowsTotal, RowsDone: e.RowsDone, Error: e.Error, Files: []FileObject{}, CreatedBy: e.CreatedByLabel,
		CreatedAt: e.CreatedAt, FinishedAt: e.FinishedAt}
	if len(e.Manifest) > 0 {
		o.Manifest = json.RawMessage(e.Manifest)
	}
	for _, name := range FileNames(e) {
		o.Files = append(o.Files, FileObject{Name: name, URL: FileURL(e, name)})
	}
	return o
}

// FileURL is the address the app serves an export's file at.
func FileURL(e db.DatasetExport, name string) string {
	return fmt.Sprintf("/api/training-datasets/%s/exports/%s/files/%s", e.DatasetID, e.ID, name)
}
