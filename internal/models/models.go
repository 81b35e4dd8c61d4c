// Package models is the model registry: registered models (the name the
// assistant asks for), their versions (what answered under that name, with
// the data and the job that made each one), the aliases that point at one
// version each ("production", "candidate"), and a history of every move that
// the database refuses to change.
//
// Web pages, the JSON API, the fine-tuning worker (which registers what it
// trained) and the deployment worker all call this package.
package models

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/serving"
)

// Version statuses, in the order a version usually goes through them.
const (
	StatusTesting    = "testing"
	StatusDeployed   = "deployed"
	StatusDeprecated = "deprecated"
	StatusArchived   = "archived"
)

// Statuses lists the version statuses.
var Statuses = []string{StatusTesting, StatusDeployed, StatusDeprecated, StatusArchived}

// Kinds of version: a whole model served as it is, an adapter a serving
// target loads on top of its base model, or a reward model: a sequence
// classifier that scores answers (best-of-N, evaluations) and writes none,
// served by a vLLM server running its pooling runner.
const (
	KindFull   = "full"
	KindLoRA   = "lora"
	KindReward = "reward"
)

// Kinds lists the kinds of version.
var Kinds = []string{KindFull, KindLoRA, KindReward}

// Limits on input.
const (
	MaxDescription = 4000
	MaxModelID     = 1000
	MaxTags        = 20
	MaxTag         = 64
)

// name is what registered model names, aliases and target names look like:
// they travel in URLs and in the assistant's configuration.
var name = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// NameRule says what a name must look like.
const NameRule = "must be lower-case letters, digits, '.', '_' or '-', starting with a letter or digit, at most 64"

// ValidName reports whether s can name a registered model.
func ValidName(s string) bool { return name.MatchString(s) }

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool *pgxpool.Pool
	// Jobs inserts deployment jobs in the transaction that records them.
	Jobs jobq.Inserter
	// Serving reaches the targets versions are deployed to.
	Serving *serving.Service
	// Gate is asked before the production alias moves; nil lets every
	// deployment through.
	Gate Gate
	// Alerts opens an alert when a version something calls is missing
	// from its target; nil opens none.
	Alerts *alerts.Service
	// ServingPoll is how often the serving check asks the targets what
	// they serve (serving.DefaultPoll when 0): resolving answers only a
	// model listed at a check no older than that.
	ServingPoll time.Duration
}

// New builds the registry: jobs starts deployments, serving reaches the
// targets, and gate is asked before the production alias moves (nil lets
// every deployment through).
func New(pool *pgxpool.Pool, jobs jobq.Inserter, serving *serving.Service, gate Gate) *Service {
	return &Service{Pool: pool, Jobs: jobs, Serving: serving, Gate: gate}
}

// Version is one version of a registered model as pages and the API show it.
type Version struct {
	ID                 uuid.UUID       `json:"id"`
	RegisteredModelID  uuid.UUID       `json:"registered_model_id"`
	Name               string          `json:"name"`
	Version            string          `json:"version"`
	Kind               string          `json:"kind"`
	Status             string          `json:"status"`
	ModelID            string          `json:"model_id"`
	BaseModel          string          `json:"base_model"`
	Aliases            []string        `json:"aliases"`
	FineTuningJobID    *uuid.UUID      `json:"fine_tuning_job_id"`
	DatasetVersionID   *uuid.UUID      `json:"dataset_version_id"`
	DatasetHash        string          `json:"dataset_hash"`
	TrainLoss          *float64        `json:"train_loss"`
	ValidLoss          *float64        `json:"valid_loss"`
	TrainedTokens      int64           `json:"trained_tokens"`
	CostUSD            *float64        `json:"cost_usd"`
	PerformanceMetrics json.RawMessage `json:"performance_metrics"`
	DeploymentConfig   json.RawMessage `json:"deployment_config"`
	Description        string          `json:"description"`
	Tags               []string        `json:"tags"`
	CreatedBy          string          `json:"created_by"`
	CreatedAt          time.Time       `json:"created_at"`
	DeployedAt         *time.Time      `json:"deployed_at"`
	// Evaluation is the newest finished evaluation's summary; nil until
	// one finished.
	Evaluation *Evaluation `json:"evaluation"`
}

func versionOf(v db.ModelVersion, m db.RegisteredModel, aliases []string) Version {
	out := Version{
		ID: v.ID, RegisteredModelID: v.RegisteredModelID, Name: m.Name, Version: v.Version, Kind: v.Kind,
		Status: string(v.Status), ModelID: v.ModelID, BaseModel: v.BaseModel, Aliases: aliases,
		DatasetHash: v.DatasetHash, TrainedTokens: v.TrainedTokens,
		PerformanceMetrics: v.PerformanceMetrics, Evaluation: evaluationOf(v.Evaluation), DeploymentConfig: v.DeploymentConfig,
		Description: m.Description, Tags: m.Tags, CreatedBy: v.CreatedByLabel, CreatedAt: v.CreatedAt, DeployedAt: v.DeployedAt,
	}
	if out.Aliases == nil {
		out.Aliases = []string{}
	}
	if v.FineTuningJobID.Valid {
		out.FineTuningJobID = &v.FineTuningJobID.UUID
	}
	if v.DatasetVersionID.Valid {
		out.DatasetVersionID = &v.DatasetVersionID.UUID
	}
	if v.TrainLoss.Valid {
		out.TrainLoss = &v.TrainLoss.Float64
	}
	if v.ValidLoss.Valid {
		out.ValidLoss = &v.ValidLoss.Float64
	}
	if v.CostMicros.Valid {
		usd := float64(v.CostMicros.Int64) / 1e6
		out.CostUSD = &usd
	}
	return out
}

// NewVersion is a version registered by hand: a model that already exists
// somewhere (the one in production today, a provider's model), so that
// deployments and experiments can name it.
type NewVersion struct {
	Name        string `json:"name"`
	Version     string `json:"version"` // empty: the next minor version
	ModelID     string `json:"model_id"`
	BaseModel   string `json:"base_model"`
	Kind        string `json:"kind"` // empty: full; full, lora or reward
	Description string `json:"description"`
}

func (in *NewVersion) validate() error {
	v := &errs.Invalid{}
	if in.Name == "" {
		v.Add("name", "is required")
	} else if !name.MatchString(in.Name) {
		v.Add("name", "%s", NameRule)
	}
	if in.Version != "" {
		if _, ok := parseSemver(in.Version); !ok {
			v.Add("version", "must be a version like 1.2.0")
		}
	}
	if v.Text("model_id", in.ModelID, MaxModelID, true) && strings.ContainsAny(in.ModelID, " \t\r\n") {
		v.Add("model_id", "must not contain spaces")
	}
	v.Text("base_model", in.BaseModel, MaxModelID, false)
	v.Text("description", in.Description, MaxDescription, false)
	if in.Kind == "" {
		in.Kind = KindFull
	}
	if !slices.Contains(Kinds, in.Kind) {
		v.Add("kind", "must be full, lora or reward")
	}
	if in.Kind == KindLoRA && strings.TrimSpace(in.BaseModel) == "" {
		v.Add("base_model", "is required for a LoRA adapter: the model it loads onto")
	}
	return v.Err()
}

// Register adds a version registered by hand, creating its registered model
// on first use.
func (s *Service) Register(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewVersion) (Version, error) {
	if err := in.validate(); err != nil {
		return Version{}, err
	}
	var out Version
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		m, err := q.RegisteredModelInsertOrGet(ctx, db.RegisteredModelInsertOrGetParams{OrgID: orgID, Name: in.Name, Description: in.Description})
		if err != nil {
			return err
		}
		v, err := insertVersion(ctx, q, actor, m, db.ModelVersionInsertParams{
			OrgID: orgID, RegisteredModelID: m.ID, Version: in.Version, Kind: in.Kind,
			ModelID: in.ModelID, BaseModel: in.BaseModel, CreatedByLabel: actor.Label,
		})
		if err != nil {
			return err
		}
		out = versionOf(v, m, nil)
		return nil
	})
	return out, err
}

// TrainedVersion is what a succeeded fine-tuning job registers.
type TrainedVersion struct {
	ModelName        string // the registered model chosen at launch
	JobID            uuid.UUID
	ModelID          string
	BaseModel        string
	Kind             string
	DatasetVersionID uuid.UUID
	DatasetHash      string
	TrainLoss        *float64
	ValidLoss        *float64
	TrainedTokens    int64
	CostMicros       *int64
}

// RegisterTrainedTx registers what a fine-tuning job trained, in the
// caller's transaction that marks the job succeeded, so a succeeded job
// always has its version. A job registers once: a second call answers the
// first version.
func (s *Service) RegisterTrainedTx(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, in TrainedVersion) (db.ModelVersion, error) {
	q := db.New(tx)
	if v, err := q.ModelVersionGetByJob(ctx, db.ModelVersionGetByJobParams{OrgID: orgID, FineTuningJobID: uuid.NullUUID{UUID: in.JobID, Valid: true}}); err == nil {
		return v, nil
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return db.ModelVersion{}, err
	}
	m, err := q.RegisteredModelInsertOrGet(ctx, db.RegisteredModelInsertOrGetParams{OrgID: orgID, Name: Slug(in.ModelName)})
	if err != nil {
		return db.ModelVersion{}, err
	}
	p := db.ModelVersionInsertParams{
		OrgID: orgID, RegisteredModelID: m.ID, Kind: in.Kind, ModelID: in.ModelID, BaseModel: in.BaseModel,
		FineTuningJobID:  uuid.NullUUID{UUID: in.JobID, Valid: true},
		DatasetVersionID: uuid.NullUUID{UUID: in.DatasetVersionID, Valid: in.DatasetVersionID != uuid.Nil},
		DatasetHash:      in.DatasetHash, TrainedTokens: in.TrainedTokens, CreatedByLabel: audit.System.Label,
	}
	if in.TrainLoss != nil {
		p.TrainLoss = pgtype.Float8{Float64: *in.TrainLoss, Valid: true}
	}
	if in.ValidLoss != nil {
		p.ValidLoss = pgtype.Float8{Float64: *in.ValidLoss, Valid: true}
	}
	if in.CostMicros != nil {
		p.CostMicros = pgtype.Int8{Int64: *in.CostMicros, Valid: true}
	}
	return insertVersion(ctx, q, audit.System, m, p)
}

// insertVersion numbers the version when no number was given, stores it and
// records it in the history and the audit log.
func insertVersion(ctx context.Context, q *db.Queries, actor audit.Actor, m db.RegisteredModel, p db.ModelVersionInsertParams) (db.ModelVersion, error) {
	// Versions of one model are numbered one at a time.
	if _, err := q.RegisteredModelGetForUpdate(ctx, db.RegisteredModelGetForUpdateParams{OrgID: m.OrgID, ID: m.ID}); err != nil {
		return db.ModelVersion{}, err
	}
	existing, err := q.ModelVersionListSemver(ctx, db.ModelVersionListSemverParams{OrgID: m.OrgID, RegisteredModelID: m.ID})
	if err != nil {
		return db.ModelVersion{}, err
	}
	if p.Version == "" {
		p.Version = NextVersion(existing, p.DatasetHash)
	} else if slices.ContainsFunc(existing, func(r db.ModelVersionListSemverRow) bool { return r.Version == p.Version }) {
		return db.ModelVersion{}, errs.InvalidField("version", "%s %s is already registered", m.Name, p.Version)
	}
	v, err := q.ModelVersionInsert(ctx, p)
	if err != nil {
		return db.ModelVersion{}, err
	}
	if err := q.ModelHistoryInsert(ctx, db.ModelHistoryInsertParams{
		OrgID: m.OrgID, RegisteredModelID: m.ID, ActorLabel: actor.Label, Action: "registered", ToVersion: v.Version,
	}); err != nil {
		return db.ModelVersion{}, err
	}
	details := map[string]any{"name": m.Name, "version": v.Version, "model_id": v.ModelID}
	if v.FineTuningJobID.Valid {
		details["fine_tuning_job_id"] = v.FineTuningJobID.UUID.String()
	}
	return v, audit.Record(ctx, q, actor, audit.Entry{OrgID: m.OrgID, Action: "model.register", TargetType: "model_version",
		TargetID: v.ID.String(), Details: details})
}

// Get returns a version of the organisation, or errs.ErrNotFound.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Version, error) {
	q := db.New(s.Pool)
	row, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Version{}, errs.NotFound(err)
	}
	aliases, err := aliasesOf(ctx, q, orgID, []uuid.UUID{row.RegisteredModel.ID})
	if err != nil {
		return Version{}, err
	}
	return versionOf(row.ModelVersion, row.RegisteredModel, aliases[row.ModelVersion.ID]), nil
}

// aliasesOf maps each version of the given registered models to the
// aliases that point at it.
func aliasesOf(ctx context.Context, q *db.Queries, orgID uuid.UUID, models []uuid.UUID) (map[uuid.UUID][]string, error) {
	rows, err := q.ModelAliasListByModels(ctx, db.ModelAliasListByModelsParams{OrgID: orgID, RegisteredModelIds: models})
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID][]string{}
	for _, a := range rows {
		out[a.VersionID] = append(out[a.VersionID], a.Alias)
	}
	return out, nil
}

// Filter narrows a list of versions; empty fields match everything.
type Filter struct {
	Name   string
	Status string
	Alias  string
}

// ListName names the versions list in its cursors.
const ListName = "models"

// List returns a page of the organisation's versions, newest first, and the
// cursor of the next page (nil on the last).
func (s *Service) List(ctx context.Context, orgID uuid.UUID, f Filter, c *keyset.Cursor, limit int) ([]Version, *keyset.Cursor, error) {
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		return nil, nil, errs.InvalidField("status", "must be one of %s", strings.Join(Statuses, ", "))
	}
	at, id := c.Bounds()
	q := db.New(s.Pool)
	rows, err := q.ModelVersionList(ctx, db.ModelVersionListParams{
		OrgID: orgID, Name: f.Name, Status: f.Status, Alias: f.Alias,
		BeforeAt: at, BeforeID: id.UUID, RowLimit: int32(limit + 1),
	})
	if err != nil {
		return nil, nil, err
	}
	rows, next := keyset.Page(rows, limit, func(r db.ModelVersionListRow) keyset.Cursor {
		return keyset.Cursor{At: r.ModelVersion.CreatedAt, ID: r.ModelVersion.ID}
	})
	var ids []uuid.UUID
	for _, r := range rows {
		ids = append(ids, r.ModelVersion.RegisteredModelID)
	}
	aliases, err := aliasesOf(ctx, q, orgID, ids)
	if err != nil {
		return nil, nil, err
	}
	registered, err := q.RegisteredModelList(ctx, orgID)
	if err != nil {
		return nil, nil, err
	}
	byID := map[uuid.UUID]db.RegisteredModel{}
	for _, m := range registered {
		byID[m.ID] = m
	}
	out := make([]Version, 0, len(rows))
	for _, r := range rows {
		out = append(out, versionOf(r.ModelVersion, byID[r.ModelVersion.RegisteredModelID], aliases[r.ModelVersion.ID]))
	}
	return out, next, nil
}

// Patch changes a version; nil fields stay as they are.
type Patch struct {
	Status      *string   `json:"status"`
	Version     *string   `json:"version"`
	Description *string   `json:"description"`
	Tags        *[]string `json:"tags"`
}

// Update applies a patch. The version number can change only while the
// version is testing: once deployed, history and the assistant's logs name
// it.
func (s *Service) Update(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, p Patch) (Version, error) {
	v := &errs.Invalid{}
	if p.Status != nil && !slices.Contains(Statuses, *p.Status) {
		v.Add("status", "must be one of %s", strings.Join(Statuses, ", "))
	}
	if p.Version != nil {
		if _, ok := parseSemver(*p.Version); !ok {
			v.Add("version", "must be a version like 1.2.0")
		}
	}
	if p.Description != nil {
		v.Text("description", *p.Description, MaxDescription, false)
	}
	if p.Tags != nil {
		if len(*p.Tags) > MaxTags {
			v.Add("tags", "at most %d tags", MaxTags)
		}
		for i, t := range *p.Tags {
			v.Text(fmt.Sprintf("tags[%d]", i), t, MaxTag, true)
		}
	}
	if err := v.Err(); err != nil {
		return Version{}, err
	}
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		cur, err := q.ModelVersionGetForUpdate(ctx, db.ModelVersionGetForUpdateParams{OrgID: orgID, ID: id})
		if err != nil {
			return errs.NotFound(err)
		}
		m, err := q.RegisteredModelGetForUpdate(ctx, db.RegisteredModelGetForUpdateParams{OrgID: orgID, ID: cur.RegisteredModelID})
		if err != nil {
			return err
		}
		next := db.ModelVersionUpdateParams{OrgID: orgID, ID: id, Version: cur.Version, Status: cur.Status}
		details := map[string]any{"name": m.Name}
		if p.Version != nil && *p.Version != cur.Version {
			if cur.Status != db.ModelVersionStatusTesting {
				return errs.InvalidField("version", "can change only while the version is testing; %s %s is %s", m.Name, cur.Version, cur.Status)
			}
			next.Version = *p.Version
			details["version"] = map[string]string{"from": cur.Version, "to": next.Version}
		}
		if p.Status != nil && *p.Status != string(cur.Status) {
			next.Status = db.ModelVersionStatus(*p.Status)
			details["status"] = map[string]string{"from": string(cur.Status), "to": *p.Status}
			if err := q.ModelHistoryInsert(ctx, db.ModelHistoryInsertParams{
				OrgID: orgID, RegisteredModelID: m.ID, ActorLabel: actor.Label, Action: "status_changed",
				FromVersion: cur.Version, ToVersion: next.Version, Result: *p.Status,
			}); err != nil {
				return err
			}
		}
		if err := q.ModelVersionUpdate(ctx, next); err != nil {
			if errs.IsUnique(err, "model_versions_registered_model_id_version_key") {
				return errs.InvalidField("version", "%s %s is already registered", m.Name, next.Version)
			}
			return err
		}
		if p.Description != nil || p.Tags != nil {
			desc, tags := m.Description, m.Tags
			if p.Description != nil {
				desc = *p.Description
			}
			if p.Tags != nil {
				tags = *p.Tags
			}
			if err := q.RegisteredModelUpdate(ctx, db.RegisteredModelUpdateParams{OrgID: orgID, ID: m.ID, Description: desc, Tags: tags}); err != nil {
				return err
			}
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "model.update", TargetType: "model_version",
			TargetID: id.String(), Details: details})
	})
	if err != nil {
		return Version{}, err
	}
	return s.Get(ctx, orgID, id)
}

// HistoryEntry is one move in a registered model's history.
type HistoryEntry struct {
	At          time.Time `json:"at"`
	Actor       string    `json:"actor"`
	Action      string    `json:"action"`
	Alias       string    `json:"alias"`
	FromVersion string    `json:"from_version"`
	ToVersion   string    `json:"to_version"`
	Target      string    `json:"target"`
	Reason      string    `json:"reason"`
	Result      string    `json:"result"`
}

// HistoryListName names a history in its cursors.
const HistoryListName = "model-history"

// History returns the history of the registered model a version belongs
// to (every version's registration, alias moves, loads and unloads), newest
// first, from before the given entry (0: the newest), and the entry the
// next page starts before (0 on the last page).
func (s *Service) History(ctx context.Context, orgID, versionID uuid.UUID, before int64, limit int) ([]HistoryEntry, int64, error) {
	q := db.New(s.Pool)
	v, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: versionID})
	if err != nil {
		return nil, 0, errs.NotFound(err)
	}
	rows, err := q.ModelHistoryList(ctx, db.ModelHistoryListParams{
		OrgID: orgID, RegisteredModelID: v.RegisteredModel.ID, BeforeID: before, RowLimit: int32(limit + 1),
	})
	if err != nil {
		return nil, 0, err
	}
	var next int64
	if len(rows) > limit {
		rows = rows[:limit]
		next = rows[limit-1].ID
	}
	out := make([]HistoryEntry, 0, len(rows))
	for _, h := range rows {
		out = append(out, HistoryEntry{
			At: h.At, Actor: h.ActorLabel, Action: h.Action, Alias: h.Alias, FromVersion: h.FromVersion,
			ToVersion: h.ToVersion, Target: h.Target, Reason: h.Reason, Result: h.Result,
		})
	}
	return out, next, nil
}

// Slug turns a free-text name (a dataset's, "Support answers Q4") into a
// registered model's name ("support-answers-q4").
func Slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_':
			if b.Len() == 0 && (r == '.' || r == '_') {
				continue
			}
			b.WriteRune(r)
			dash = false
		case b.Len() > 0 && !dash:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 64 {
			break
		}
	}
	out := strings.TrimRight(b.String(), "-._")
	if len(out) > 64 {
		out = strings.TrimRight(out[:64], "-._")
	}
	if out == "" {
		return "model"
	}
	return out
}

// NextVersion proposes the number of a new version: 1.0.0 for the first,
// a patch above the highest for a re-run on data some version was already
// trained on (same content hash), and the next minor otherwise.
func NextVersion(existing []db.ModelVersionListSemverRow, datasetHash string) string {
	var top [3]int
	found, sameData := false, false
	for _, r := range existing {
		v, ok := parseSemver(r.Version)
		if !ok {
			continue
		}
		if !found || less(top, v) {
			top = v
		}
		found = true
		if datasetHash != "" && r.DatasetHash == datasetHash {
			sameData = true
		}
	}
	switch {
	case !found:
		return "1.0.0"
	case sameData:
		return fmt.Sprintf("%d.%d.%d", top[0], top[1], top[2]+1)
	default:
		return fmt.Sprintf("%d.%d.0", top[0], top[1]+1)
	}
}

func parseSemver(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		if p == "" || len(p) > 9 || (len(p) > 1 && p[0] == '0') {
			return v, false
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || strings.ContainsAny(p, "+-") {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// RegisterJobTx registers what a succeeded fine-tuning job trained, in the
// caller's transaction that marks it succeeded: under the registered model chosen at
// launch (or the dataset's name), with the dataset version's hash, the last
// losses reported, the trained tokens and the cost. A local job trains a
// LoRA adapter (its model id is the adapter's location), or for the REWARD
// stage a reward model (its merged model's location); a provider's job a
// model the provider serves.
func (s *Service) RegisterJobTx(ctx context.Context, tx pgx.Tx, j db.FineTuningJob, model string, tokens, costMicros int64) (db.ModelVersion, error) {
	sum, err := db.New(tx).ModelVersionGetTrainingSummary(ctx, db.ModelVersionGetTrainingSummaryParams{OrgID: j.OrgID, JobID: j.ID})
	if err != nil {
		return db.ModelVersion{}, err
	}
	in := TrainedVersion{
		ModelName: cmp.Or(j.RegisteredModel, sum.DatasetName, j.DatasetLabel), JobID: j.ID, ModelID: model, BaseModel: j.BaseModel,
		Kind: KindFull, DatasetVersionID: sum.DatasetVersionID.UUID, DatasetHash: sum.ContentHash, TrainedTokens: tokens, CostMicros: &costMicros,
	}
	if j.Provider == "local" {
		in.Kind = KindLoRA
		if j.Method == string(local.Reward) {
			in.Kind = KindReward
		}
	}
	if sum.TrainLoss.Valid {
		in.TrainLoss = &sum.TrainLoss.Float64
	}
	if sum.ValidLoss.Valid {
		in.ValidLoss = &sum.ValidLoss.Float64
	}
	return s.RegisterTrainedTx(ctx, tx, j.OrgID, in)
}
