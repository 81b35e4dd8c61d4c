package models

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/serving"
)

// ScoringModel is a reward model version where it scores answers: the
// vLLM pooling server serving it now, and the name it is served under
// there.
type ScoringModel struct {
	VersionID uuid.UUID
	// Name and Version say which one it is ("support-rm 1.2.0").
	Name, Version string
	Target        string
	// Address is the server's base URL.
	Address string
	// Model is what a request sends as "model".
	Model  string
	Client *serving.VLLM
}

// NotReward is a version asked to score that is not a reward model.
type NotReward struct{ Name, Version, Kind string }

func (e *NotReward) Error() string {
	return fmt.Sprintf("%s %s is %s, not a reward model: it writes answers and does not score them", e.Name, e.Version, kindWords[e.Kind])
}

// ErrNotScoring is a reward model with no deployment Curate can send
// answers to score.
var ErrNotScoring = errors.New("the reward model is not deployed on a vLLM server running the pooling runner")

// Scoring finds where a reward model version of the organisation scores
// answers: the newest of its deployments still served by a vLLM pooling
// target. Another organisation's version, or none, is errs.ErrNotFound; a
// version of another kind a *NotReward; one served nowhere Curate can ask
// ErrNotScoring, with the ScoringModel's VersionID, Name and Version set.
func (s *Service) Scoring(ctx context.Context, orgID, versionID uuid.UUID) (ScoringModel, error) {
	return s.scoring(ctx, orgID, db.DeploymentGetScoringParams{VersionID: uuid.NullUUID{UUID: versionID, Valid: true}})
}

// ScoringAlias is Scoring for the version an alias of a registered model
// names; no such model or alias is errs.ErrNotFound.
func (s *Service) ScoringAlias(ctx context.Context, orgID uuid.UUID, name, alias string) (ScoringModel, error) {
	return s.scoring(ctx, orgID, db.DeploymentGetScoringParams{Name: pgtype.Text{String: name, Valid: true}, Alias: pgtype.Text{String: alias, Valid: true}})
}

// scoring reads where the version scores in one statement; only when it
// scores nowhere are the version and its alias read again, to say why.
func (s *Service) scoring(ctx context.Context, orgID uuid.UUID, p db.DeploymentGetScoringParams) (ScoringModel, error) {
	p.OrgID, p.VersionKind, p.TargetKind = orgID, KindReward, serving.KindVLLMPooling
	q := db.New(s.Pool)
	row, err := q.DeploymentGetScoring(ctx, p)
	if err == nil {
		c, err := s.Serving.VLLM(row.ServingTarget)
		if err != nil {
			return ScoringModel{}, err
		}
		return ScoringModel{VersionID: row.VersionID, Name: row.ModelName, Version: row.Version, Target: row.ServingTarget.Name,
			Address: row.ServingTarget.BaseUrl, Model: row.ServedName, Client: c}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return ScoringModel{}, err
	}
	id := p.VersionID.UUID
	if !p.VersionID.Valid {
		if id, err = s.AliasVersion(ctx, orgID, p.Name.String, p.Alias.String); err != nil {
			return ScoringModel{}, err
		}
	}
	v, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return ScoringModel{}, errs.NotFound(err)
	}
	if v.ModelVersion.Kind != KindReward {
		return ScoringModel{}, &NotReward{Name: v.RegisteredModel.Name, Version: v.ModelVersion.Version, Kind: v.ModelVersion.Kind}
	}
	return ScoringModel{VersionID: id, Name: v.RegisteredModel.Name, Version: v.ModelVersion.Version}, ErrNotScoring
}

// AliasVersion is the version an alias of a registered model names, or
// errs.ErrNotFound when the organisation has no such model or alias.
func (s *Service) AliasVersion(ctx context.Context, orgID uuid.UUID, name, alias string) (uuid.UUID, error) {
	id, err := db.New(s.Pool).ModelAliasGetByModelName(ctx, db.ModelAliasGetByModelNameParams{OrgID: orgID, Name: name, Alias: alias})
	if err != nil {
		return uuid.Nil, errs.NotFound(err)
	}
	return id, nil
}
