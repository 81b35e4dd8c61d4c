package feedback

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
)

// Object is a stored item as the API returns it.
type Object struct {
	ID            uuid.UUID       `json:"id"`
	ExternalID    *string         `json:"external_id"`
	SessionID     string          `json:"session_id"`
	TraceID       string          `json:"trace_id"`
	UserID        string          `json:"user_id"`
	Query         string          `json:"query"`
	Response      string          `json:"response"`
	Context       json.RawMessage `json:"context"`
	Model         string          `json:"model"`
	ExperimentArm string          `json:"experiment_arm"`
	FeedbackType  string          `json:"feedback_type"`
	Rating        *int            `json:"rating"`
	Dimensions    Dimensions      `json:"dimensions"`
	Comment       string          `json:"comment"`
	Correction    string          `json:"correction"`
	LatencyMS     *int            `json:"latency_ms"`
	Tags          []string        `json:"tags"`
	Status        string          `json:"status"`
	AssigneeID    *uuid.UUID      `json:"assignee_id"`
	ReviewerID    *uuid.UUID      `json:"reviewer_id"`
	ReviewedAt    *time.Time      `json:"reviewed_at"`
	Source        string          `json:"source"`
	Rank          *int            `json:"rank,omitempty"`
	RankGroup     string          `json:"rank_group,omitempty"`
	PII           []string        `json:"pii"`
	DuplicateOf   *uuid.UUID      `json:"duplicate_of"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	Version       int32           `json:"version"`
	Error         bool            `json:"error"` // the answer was an error
	// IsTrainingData says whether the item may become training data:
	// hygiene's flags decide (see internal/hygiene) unless a person did.
	IsTrainingData bool     `json:"is_training_data"`
	HygieneFlags   []string `json:"hygiene_flags"`
	// GivenByID is the organisation's user who gave the feedback (a
	// curator trying the assistant, seed 004's curator_email), when one
	// did; CreatedAt is when it was given.
	GivenByID *uuid.UUID `json:"given_by_id"`
}

// ToObject turns a row into its API shape.
func ToObject(f db.Feedback) Object {
	o := Object{
		ID: f.ID, SessionID: f.SessionID, TraceID: f.TraceID, UserID: f.EndUserID, Query: f.Query, Response: f.Response,
		Context: f.Context, Model: f.Model, ExperimentArm: f.ExperimentArm, FeedbackType: string(f.FeedbackType),
		Rating: int2(f.Rating), Comment: f.Comment, Correction: f.Correction, Tags: f.Tags, Status: string(f.Status),
		AssigneeID: idPtr(f.AssigneeID), ReviewerID: idPtr(f.ReviewerID), ReviewedAt: f.ReviewedAt, Source: string(f.Source),
		Rank: int2(f.Rank), RankGroup: f.RankGroup, PII: f.PiiKinds, DuplicateOf: idPtr(f.DuplicateOf),
		CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt, Version: f.Version, Error: f.IsError,
		IsTrainingData: f.IsTrainingData, HygieneFlags: f.HygieneFlags, GivenByID: idPtr(f.GivenBy),
		Dimensions: Dimensions{Accuracy: int2(f.DimAccuracy), Helpfulness: int2(f.DimHelpfulness), Clarity: int2(f.DimClarity), Safety: int2(f.DimSafety)},
	}
	if f.ExternalID.Valid {
		o.ExternalID = &f.ExternalID.String
	}
	if f.LatencyMs.Valid {
		n := int(f.LatencyMs.Int32)
		o.LatencyMS = &n
	}
	return o
}

func int2(v pgtype.Int2) *int {
	if !v.Valid {
		return nil
	}
	n := int(v.Int16)
	return &n
}

func idPtr(v uuid.NullUUID) *uuid.UUID {
	if !v.Valid {
		return nil
	}
	return &v.UUID
}
