// Package datasets curates training datasets: their lifecycle (draft →
// curating → ready → exported → archived), membership (preference pairs,
// or approved and corrected feedback), freezing a version (an exact copy of
// the members' exported fields with a content hash), the deterministic
// train/validation split, the validation report per target format, and
// exports streamed from Postgres to blob storage.
//
// The web pages, the JSON API, the export job and the CLI all call this
// package, so each path behaves the same.
package datasets

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"gocloud.dev/blob"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/hygiene"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/scratch"
)

// Dataset types.
const (
	TypePreferencePairs   = "preference_pairs"
	TypeInstructionTuning = "instruction_tuning"
	TypeDPO               = "dpo"
)

// Types lists the dataset types.
var Types = []string{TypePreferencePairs, TypeInstructionTuning, TypeDPO}

// KindOf is the kind of example a dataset type holds.
func KindOf(datasetType string) string {
	if datasetType == TypeInstructionTuning {
		return KindSFT
	}
	return KindPreference
}

// Limits on input.
const (
	MaxName         = 200
	MaxDescription  = 4000
	MaxSystemPrompt = 16 << 10
	MaxIDs          = 10000  // ids per membership change
	MaxFilterAdd    = 100000 // members one filter may add
)

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool *pgxpool.Pool
	// Jobs inserts the export job in the transaction that records the
	// export.
	Jobs jobq.Inserter
	// Bucket holds export files; nil where nothing is exported (the CLI
	// writes to a directory bucket of its own).
	Bucket *blob.Bucket
	// Scratch holds an export's files while they are written (see
	// WriteFiles).
	Scratch *scratch.Dir
	// SyncValidationLimit overrides DefaultSyncValidationLimit when set.
	SyncValidationLimit int
}

// New builds the dataset service: jobs starts exports, their files are
// written in scratch and kept in bucket (nil where nothing is exported).
func New(pool *pgxpool.Pool, jobs jobq.Inserter, bucket *blob.Bucket, scratch *scratch.Dir) *Service {
	return &Service{Pool: pool, Jobs: jobs, Bucket: bucket, Scratch: scratch}
}

// Settings are a dataset's editable fields.
type Settings struct {
	Name              string
	Description       string
	SystemPrompt      string
	ExportFormat      string // "" on create: the type's usual format
	BaseModel         string
	SplitStrategy     string // "" on create: random
	ValidationPercent int
	SplitSeed         int64
	// AgreedOnly leaves out members whose overlapping review is open or
	// disputed. Nil on create: on when the organisation asks for
	// overlapping review (a review plan is active).
	AgreedOnly *bool
}

// NewDataset is what creating a dataset takes. Members, when given, are
// added as AddMembers adds them, in the same transaction: a bad one makes
// no dataset.
type NewDataset struct {
	Type string
	Settings
	Members []uuid.UUID
}

// DefaultFormat is the export format a new dataset of the type targets.
func DefaultFormat(datasetType string) export.Format {
	if datasetType == TypeInstructionTuning {
		return export.OpenAIChat
	}
	return export.TRLPreference
}

func (s *Settings) validate(v *errs.Invalid, datasetType string) {
	s.Name = strings.TrimSpace(s.Name)
	s.BaseModel = strings.TrimSpace(s.BaseModel)
	switch {
	case s.Name == "":
		v.Add("name", "is required")
	case utf8.RuneCountInString(s.Name) > MaxName:
		v.Add("name", "at most %d characters", MaxName)
	}
	if len(s.Description) > MaxDescription {
		v.Add("description", "at most %d bytes", MaxDescription)
	}
	if len(s.SystemPrompt) > MaxSystemPrompt {
		v.Add("system_prompt", "at most %d bytes", MaxSystemPrompt)
	}
	if len(s.BaseModel) > 200 {
		v.Add("base_model", "at most 200 characters")
	}
	for field, text := range map[string]string{"name": s.Name, "description": s.Description, "system_prompt": s.SystemPrompt} {
		if !utf8.ValidString(text) {
			v.Add(field, "is not valid UTF-8")
		}
	}
	if s.ExportFormat == "" {
		s.ExportFormat = string(DefaultFormat(datasetType))
	}
	if f, err := export.ParseFormatFor(s.ExportFormat, export.Kind(KindOf(datasetType))); err != nil {
		v.Add("export_format", "%s", strings.TrimPrefix(err.Error(), "unknown export format "))
	} else {
		s.ExportFormat = string(f)
		if !f.Accepts(export.Kind(KindOf(datasetType))) {
			v.Add("export_format", "%s cannot hold %s examples: pick a format that takes them", f, KindOf(datasetType))
		}
	}
	if s.SplitStrategy == "" {
		s.SplitStrategy = SplitRandom
	}
	if !slices.Contains(SplitStrategies, s.SplitStrategy) {
		v.Add("split_strategy", "must be one of %s", strings.Join(SplitStrategies, ", "))
	}
	if s.ValidationPercent < 0 || s.ValidationPercent > 50 {
		v.Add("validation_percent", "must be 0 to 50")
	}
}

// Create makes a draft dataset.
func (s *Service) Create(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewDataset) (db.TrainingDataset, error) {
	v := &errs.Invalid{}
	if !slices.Contains(Types, in.Type) {
		v.Add("dataset_type", "must be one of %s", strings.Join(Types, ", "))
	}
	in.validate(v, in.Type)
	if len(in.Members) > MaxIDs {
		v.Add("ids", "at most %d per request, not %d", MaxIDs, len(in.Members))
	}
	if v.Has() {
		return db.TrainingDataset{}, v
	}
	var out db.TrainingDataset
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		var err error
		out, err = insertDataset(ctx, q, actor, orgID, in)
		if err != nil {
			return err
		}
		if len(in.Members) == 0 {
			return nil
		}
		_, out, err = changeMembersIn(ctx, q, actor, orgID, out.ID, "dataset.members_add", func(q *db.Queries, d db.TrainingDataset) (int64, error) {
			if err := checkEligible(ctx, q, orgID, d, in.Members); err != nil {
				return 0, err
			}
			return insertMembers(ctx, q, orgID, d, in.Members)
		})
		return err
	})
	return out, err
}

// insertDataset stores a validated new dataset and audits it, in the
// caller's transaction.
// A dataset keeps to agreed items while overlapping review is on, unless
// its creator said otherwise.
func insertDataset(ctx context.Context, q *db.Queries, actor audit.Actor, orgID uuid.UUID, in NewDataset) (db.TrainingDataset, error) {
	agreedOnly, err := overlapOn(ctx, q, orgID)
	if err != nil {
		return db.TrainingDataset{}, err
	}
	if in.AgreedOnly != nil {
		agreedOnly = *in.AgreedOnly
	}
	out, err := q.DatasetInsert(ctx, db.DatasetInsertParams{
		OrgID: orgID, Name: in.Name, Description: in.Description, DatasetType: db.DatasetType(in.Type),
		SystemPrompt: in.SystemPrompt, ExportFormat: in.ExportFormat, BaseModel: in.BaseModel,
		SplitStrategy: db.SplitStrategy(in.SplitStrategy), ValidationPercent: int16(in.ValidationPercent),
		SplitSeed: in.SplitSeed, CreatedBy: userID(actor), CuratorLabel: actor.Label, AgreedOnly: agreedOnly,
	})
	if err != nil {
		return out, err
	}
	return out, audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "dataset.create", TargetType: "dataset",
		TargetID: out.ID.String(), Details: map[string]any{"name": out.Name, "type": in.Type, "agreed_only": out.AgreedOnly}})
}

// Detail is a dataset with what its page and API object show.
type Detail struct {
	Dataset     db.TrainingDataset
	MemberCount int
	Current     *db.DatasetVersion // nil until frozen
	Versions    []db.DatasetVersion
	Exports     []db.DatasetExport
	// Jobs are the fine-tuning jobs trained on the versions, newest first.
	Jobs []db.DatasetVersionListJobsRow
}

// Get returns a dataset of the organisation, or errs.ErrNotFound.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Detail, error) {
	q := db.New(s.Pool)
	row, err := q.DatasetGet(ctx, db.DatasetGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Detail{}, errs.NotFound(err)
	}
	d := Detail{Dataset: row.TrainingDataset, MemberCount: int(row.MemberCount)}
	if d.Versions, err = q.DatasetVersionList(ctx, db.DatasetVersionListParams{OrgID: orgID, DatasetID: id}); err != nil {
		return Detail{}, err
	}
	for i := range d.Versions {
		if d.Dataset.CurrentVersionID.Valid && d.Versions[i].ID == d.Dataset.CurrentVersionID.UUID {
			d.Current = &d.Versions[i]
		}
	}
	if d.Exports, err = q.ExportList(ctx, db.ExportListParams{OrgID: orgID, DatasetID: id}); err != nil {
		return Detail{}, err
	}
	if d.Jobs, err = q.DatasetVersionListJobs(ctx, db.DatasetVersionListJobsParams{OrgID: orgID, DatasetID: id}); err != nil {
		return Detail{}, err
	}
	return d, nil
}

// ListFilter narrows the list.
type ListFilter struct {
	Status string // "" for all but archived
	Type   string
}

// ListParams are the query parameters ParseListFilter reads.
var ListParams = []string{"status", "type"}

// ParseListFilter reads ?status= and ?type=.
func ParseListFilter(q url.Values) (ListFilter, error) {
	f := ListFilter{Status: q.Get("status"), Type: q.Get("type")}
	v := &errs.Invalid{}
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		v.Add("status", "must be one of %s", strings.Join(Statuses, ", "))
	}
	if f.Type != "" && !slices.Contains(Types, f.Type) {
		v.Add("type", "must be one of %s", strings.Join(Types, ", "))
	}
	return f, v.Err()
}

// ListName is the name the dataset list's keyset cursors carry: a cursor
// from another list is refused.
const ListName = "datasets"

// List returns one keyset page of datasets, newest first, and the cursor of
// the next page (nil on the last).
func (s *Service) List(ctx context.Context, orgID uuid.UUID, f ListFilter, cursor *keyset.Cursor, limit int) ([]db.DatasetListRow, *keyset.Cursor, error) {
	p := db.DatasetListParams{OrgID: orgID, RowLimit: int32(limit + 1)}
	if f.Status != "" {
		p.Status = db.NullDatasetStatus{DatasetStatus: db.DatasetStatus(f.Status), Valid: true}
	}
	if f.Type != "" {
		p.DatasetType = db.NullDatasetType{DatasetType: db.DatasetType(f.Type), Valid: true}
	}
	p.CursorTime, p.CursorID = cursor.Bounds()
	rows, err := db.New(s.Pool).DatasetList(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	rows, next := keyset.Page(rows, limit, func(r db.DatasetListRow) keyset.Cursor {
		return keyset.Cursor{At: r.TrainingDataset.CreatedAt, ID: r.TrainingDataset.ID}
	})
	return rows, next, nil
}

// Update changes a dataset's settings. version is the version the caller
// saw (0: don't check); a stale one is a conflict. Changing the split or
// the system prompt of a frozen dataset changes what the next freeze
// makes, so it moves the dataset back to curating.
func (s *Service) Update(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, version int32, patch func(*Settings)) (db.TrainingDataset, error) {
	var out db.TrainingDataset
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		cur, err := lock(ctx, q, orgID, id)
		if err != nil {
			return err
		}
		if cur.Status == StatusArchived {
			return &errs.Conflict{Message: "the dataset is archived; archived datasets cannot change"}
		}
		if version != 0 && cur.Version != version {
			return &errs.Conflict{Message: "someone else changed this dataset since you opened it: reload it and try again", Current: cur}
		}
		agreedOnly := cur.AgreedOnly
		set := Settings{Name: cur.Name, Description: cur.Description, SystemPrompt: cur.SystemPrompt, ExportFormat: cur.ExportFormat,
			BaseModel: cur.BaseModel, SplitStrategy: string(cur.SplitStrategy), ValidationPercent: int(cur.ValidationPercent), SplitSeed: cur.SplitSeed,
			AgreedOnly: &agreedOnly}
		before := set
		patch(&set)
		v := &errs.Invalid{}
		set.validate(v, string(cur.DatasetType))
		if v.Has() {
			return v
		}
		out, err = q.DatasetUpdate(ctx, db.DatasetUpdateParams{OrgID: orgID, ID: id, Version: cur.Version,
			Name: set.Name, Description: set.Description, SystemPrompt: set.SystemPrompt, ExportFormat: set.ExportFormat,
			BaseModel: set.BaseModel, SplitStrategy: db.SplitStrategy(set.SplitStrategy),
			ValidationPercent: int16(set.ValidationPercent), SplitSeed: set.SplitSeed, AgreedOnly: set.AgreedOnly != nil && *set.AgreedOnly})
		if err != nil {
			return err
		}
		frozenChange := set.SystemPrompt != before.SystemPrompt || set.SplitStrategy != before.SplitStrategy ||
			set.ValidationPercent != before.ValidationPercent || set.SplitSeed != before.SplitSeed || out.AgreedOnly != cur.AgreedOnly
		if frozenChange && (cur.Status == StatusReady || cur.Status == StatusExported) {
			if out, err = q.DatasetUpdateStatus(ctx, db.DatasetUpdateStatusParams{OrgID: orgID, ID: id, Status: StatusCurating}); err != nil {
				return err
			}
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "dataset.update", TargetType: "dataset",
			TargetID: id.String(), Details: audit.Unconditional(map[string]any{"version": out.Version, "status": out.Status}, version)})
	})
	return out, err
}

// Transition moves a dataset to another status. Moving to ready freezes a
// version (see Freeze); exported is reached only by finishing an export.
func (s *Service) Transition(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, to string) (db.TrainingDataset, error) {
	if to == StatusReady {
		if _, err := s.Freeze(ctx, actor, orgID, id); err != nil {
			return db.TrainingDataset{}, err
		}
		d, err := s.Get(ctx, orgID, id)
		return d.Dataset, err
	}
	if to == StatusExported {
		return db.TrainingDataset{}, errs.InvalidField("status", "a dataset becomes exported when an export of it finishes; start an export instead")
	}
	var out db.TrainingDataset
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		cur, err := lock(ctx, q, orgID, id)
		if err != nil {
			return err
		}
		if string(cur.Status) == to {
			out = cur
			return nil
		}
		if err := checkTransition(string(cur.Status), to); err != nil {
			return err
		}
		if out, err = q.DatasetUpdateStatus(ctx, db.DatasetUpdateStatusParams{OrgID: orgID, ID: id, Status: db.DatasetStatus(to)}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "dataset.status", TargetType: "dataset",
			TargetID: id.String(), Details: map[string]any{"from": cur.Status, "to": to}})
	})
	return out, err
}

func lock(ctx context.Context, q *db.Queries, orgID, id uuid.UUID) (db.TrainingDataset, error) {
	d, err := q.DatasetGetForUpdate(ctx, db.DatasetGetForUpdateParams{OrgID: orgID, ID: id})
	return d, errs.NotFound(err)
}

// AddMembers adds pairs (preference datasets) or approved and corrected
// feedback (instruction datasets) by id. Every id must qualify, or nothing
// is added and the error names each bad one. Adding to a draft starts
// curating; adding to a frozen dataset moves it back to curating (its
// versions stay as they are).
func (s *Service) AddMembers(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, ids []uuid.UUID) (int, error) {
	return s.addMembers(ctx, actor, orgID, id, ids, nil)
}

// addMembers is AddMembers with a check of the locked dataset (nil: none)
// that may refuse the change before anything is added.
func (s *Service) addMembers(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, ids []uuid.UUID, check func(db.TrainingDataset) error) (int, error) {
	if len(ids) == 0 {
		return 0, errs.InvalidField("ids", "name at least one pair or feedback item")
	}
	if len(ids) > MaxIDs {
		return 0, errs.InvalidField("ids", "at most %d per request, not %d", MaxIDs, len(ids))
	}
	return s.changeMembers(ctx, actor, orgID, id, "dataset.members_add", func(q *db.Queries, d db.TrainingDataset) (int64, error) {
		if check != nil {
			if err := check(d); err != nil {
				return 0, err
			}
		}
		if err := checkEligible(ctx, q, orgID, d, ids); err != nil {
			return 0, err
		}
		return insertMembers(ctx, q, orgID, d, ids)
	})
}

func checkEligible(ctx context.Context, q *db.Queries, orgID uuid.UUID, d db.TrainingDataset, ids []uuid.UUID) error {
	pos := make(map[uuid.UUID]int, len(ids))
	for i, id := range ids {
		if _, ok := pos[id]; !ok {
			pos[id] = i
		}
	}
	v := &errs.Invalid{}
	if KindOf(string(d.DatasetType)) == KindPreference {
		missing, err := q.DatasetListMissingPairs(ctx, db.DatasetListMissingPairsParams{OrgID: orgID, Ids: ids})
		if err != nil {
			return err
		}
		for _, m := range missing {
			v.Add(fmt.Sprintf("ids[%d]", pos[m]), "no preference pair %s in this organisation (a %s dataset holds preference pairs)", m, d.DatasetType)
		}
	} else {
		bad, err := q.DatasetListIneligibleFeedback(ctx, db.DatasetListIneligibleFeedbackParams{OrgID: orgID, Ids: ids})
		if err != nil {
			return err
		}
		for _, b := range bad {
			switch {
			case b.Status == "":
				v.Add(fmt.Sprintf("ids[%d]", pos[b.ID]), "no feedback %s in this organisation (an instruction dataset holds approved or corrected feedback)", b.ID)
			case b.Status != "approved" && b.Status != "corrected":
				v.Add(fmt.Sprintf("ids[%d]", pos[b.ID]), "feedback %s is %s; only approved or corrected feedback is training material", b.ID, b.Status)
			default:
				v.Add(fmt.Sprintf("ids[%d]", pos[b.ID]), "feedback %s is not training data: %s", b.ID, hygiene.Why(b.HygieneFlags, b.TrainingSetBy))
			}
		}
	}
	slices.SortStableFunc(v.Errors, func(a, b errs.FieldError) int { return strings.Compare(a.Field, b.Field) })
	return v.Err()
}

func insertMembers(ctx context.Context, q *db.Queries, orgID uuid.UUID, d db.TrainingDataset, ids []uuid.UUID) (int64, error) {
	if KindOf(string(d.DatasetType)) == KindPreference {
		return q.DatasetMemberInsertPairs(ctx, db.DatasetMemberInsertPairsParams{DatasetID: d.ID, OrgID: orgID, Ids: ids})
	}
	return q.DatasetMemberInsertFeedback(ctx, db.DatasetMemberInsertFeedbackParams{DatasetID: d.ID, OrgID: orgID, Ids: ids})
}

// AddByFilter adds every pair or eligible feedback item the filter
// matches, and saves the filter on the dataset so it can be applied again.
// Pairs take method, tag, min_strength, from, to and q; feedback takes the
// queue's filter (only approved and corrected items are added) and, with
// rubric_id, rubric_question and rubric_answer, keeps the items whose
// settled answer to that question is the one asked (AnswerCondition).
func (s *Service) AddByFilter(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, params url.Values) (int, error) {
	return s.changeMembers(ctx, actor, orgID, id, "dataset.members_add_filter", func(q *db.Queries, d db.TrainingDataset) (int64, error) {
		var ids []uuid.UUID
		var saved string
		cond, err := parseAnswerCondition(params)
		if err != nil {
			return 0, err
		}
		if KindOf(string(d.DatasetType)) == KindPreference {
			if cond != nil {
				return 0, errs.InvalidField(ParamQuestion, "a rubric answer selects feedback items: %s holds preference pairs", d.Name)
			}
			pf, err := ParsePairFilter(params)
			if err != nil {
				return 0, err
			}
			if ids, err = q.DatasetListPairIDsByFilter(ctx, pf.params(orgID)); err != nil {
				return 0, err
			}
			saved = pf.Values().Encode()
		} else {
			ff, err := feedback.ParseFilter(params)
			if err != nil {
				return 0, err
			}
			if ff.Status != "" && ff.Status != "approved" && ff.Status != "corrected" {
				return 0, errs.InvalidField("status", "only approved or corrected feedback can be added; %s feedback is not training material", ff.Status)
			}
			if ids, err = q.FeedbackListMatchingIDs(ctx, ff.MatchingParams(orgID, MaxFilterAdd+1)); err != nil {
				return 0, err
			}
			if cond != nil && len(ids) <= MaxFilterAdd {
				if ids, err = cond.keep(ctx, q, orgID, ids); err != nil {
					return 0, err
				}
			}
			vals := ff.Values()
			cond.values(vals)
			saved = vals.Encode()
		}
		if len(ids) > MaxFilterAdd {
			return 0, errs.InvalidField("filter", "matches more than %d items; narrow it", MaxFilterAdd)
		}
		if err := q.DatasetUpdateSavedFilter(ctx, db.DatasetUpdateSavedFilterParams{OrgID: orgID, ID: id, SavedFilter: saved}); err != nil {
			return 0, err
		}
		if len(ids) == 0 {
			return 0, nil
		}
		return insertMembers(ctx, q, orgID, d, ids)
	})
}

// RemoveMembers takes members out by pair or feedback id.
func (s *Service) RemoveMembers(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, ids []uuid.UUID) (int, error) {
	if len(ids) == 0 || len(ids) > MaxIDs {
		return 0, errs.InvalidField("ids", "name 1 to %d members", MaxIDs)
	}
	return s.changeMembers(ctx, actor, orgID, id, "dataset.members_remove", func(q *db.Queries, d db.TrainingDataset) (int64, error) {
		return q.DatasetMemberDelete(ctx, db.DatasetMemberDeleteParams{DatasetID: d.ID, Ids: ids})
	})
}

// changeMembers runs one membership change in a transaction with the
// dataset locked, moves the status to curating and audits the change.
func (s *Service) changeMembers(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, action string,
	change func(q *db.Queries, d db.TrainingDataset) (int64, error)) (int, error) {
	var n int64
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		var err error
		n, _, err = changeMembersIn(ctx, q, actor, orgID, id, action, change)
		return err
	})
	return int(n), err
}

// changeMembersIn is changeMembers in the caller's transaction; it returns
// the dataset as it is after the change.
func changeMembersIn(ctx context.Context, q *db.Queries, actor audit.Actor, orgID, id uuid.UUID, action string,
	change func(q *db.Queries, d db.TrainingDataset) (int64, error)) (int64, db.TrainingDataset, error) {
	d, err := lock(ctx, q, orgID, id)
	if err != nil {
		return 0, d, err
	}
	if d.Status == StatusArchived {
		return 0, d, &errs.Conflict{Message: "the dataset is archived; archived datasets cannot change"}
	}
	n, err := change(q, d)
	if err != nil {
		return 0, d, err
	}
	from := d.Status
	if n > 0 && d.Status != StatusCurating {
		if d, err = q.DatasetUpdateStatus(ctx, db.DatasetUpdateStatusParams{OrgID: orgID, ID: id, Status: StatusCurating}); err != nil {
			return 0, d, err
		}
	}
	return n, d, audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: action, TargetType: "dataset",
		TargetID: id.String(), Details: map[string]any{"changed": n, "from_status": from}})
}

// CreatePair stores a new pair and adds it to a preference dataset of the
// organisation in one step (the seed's dataset_id on a pair): if either
// cannot be done, neither is. It returns the pair and the dataset as it
// is after.
func (s *Service) CreatePair(ctx context.Context, actor audit.Actor, orgID, datasetID uuid.UUID, in pairs.Input) (db.PreferencePair, db.TrainingDataset, error) {
	var (
		p db.PreferencePair
		d db.TrainingDataset
	)
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		var err error
		_, d, err = changeMembersIn(ctx, q, actor, orgID, datasetID, "dataset.members_add", func(q *db.Queries, d db.TrainingDataset) (int64, error) {
			if KindOf(string(d.DatasetType)) != KindPreference {
				return 0, errs.InvalidField("dataset_id", "is an %s dataset, which holds feedback items, not preference pairs", d.DatasetType)
			}
			var err error
			if p, err = pairs.CreateTx(ctx, tx, actor, orgID, in); err != nil {
				return 0, err
			}
			return insertMembers(ctx, q, orgID, d, []uuid.UUID{p.ID})
		})
		if errors.Is(err, errs.ErrNotFound) {
			return errs.InvalidField("dataset_id", "no such dataset in this organisation")
		}
		return err
	})
	return p, d, err
}

// Members lists the newest members for the detail page.
func (s *Service) Members(ctx context.Context, id uuid.UUID, limit int) ([]db.DatasetMemberListRow, error) {
	return db.New(s.Pool).DatasetMemberList(ctx, db.DatasetMemberListParams{DatasetID: id, RowLimit: int32(limit)})
}

// PairFilter selects preference pairs to add.
type PairFilter struct {
	Method      string
	Tag         string
	MinStrength float64
	From, To    time.Time
	Q           string
}

// PairMethods are the ways a pair can have been made.
var PairMethods = []string{"manual", "correction", "same_query", "threshold", "multi_aspect", "ranking", "import"}

// ParsePairFilter reads a pair filter from query parameters.
func ParsePairFilter(q url.Values) (PairFilter, error) {
	v := &errs.Invalid{}
	f := PairFilter{Method: q.Get("method"), Tag: strings.ToLower(strings.TrimSpace(q.Get("tag"))), Q: strings.TrimSpace(q.Get("q"))}
	if f.Method != "" && !slices.Contains(PairMethods, f.Method) {
		v.Add("method", "must be one of %s", strings.Join(PairMethods, ", "))
	}
	if s := q.Get("min_strength"); s != "" {
		if _, err := fmt.Sscanf(s, "%g", &f.MinStrength); err != nil || f.MinStrength < 0 || f.MinStrength > 1 {
			v.Add("min_strength", "must be a number from 0 to 1")
		}
	}
	for _, d := range []struct {
		name string
		to   *time.Time
		end  bool
	}{{"from", &f.From, false}, {"to", &f.To, true}} {
		s := q.Get(d.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			v.Add(d.name, "must be a date like 2026-01-31")
			continue
		}
		if d.end {
			t = t.AddDate(0, 0, 1)
		}
		*d.to = t
	}
	if len(f.Q) > 500 || len(f.Tag) > 64 {
		v.Add("q", "too long")
	}
	return f, v.Err()
}

// Values writes the filter back as query parameters.
func (f PairFilter) Values() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("method", f.Method)
	set("tag", f.Tag)
	if f.MinStrength > 0 {
		set("min_strength", fmt.Sprint(f.MinStrength))
	}
	if !f.From.IsZero() {
		set("from", f.From.Format(time.DateOnly))
	}
	if !f.To.IsZero() {
		set("to", f.To.AddDate(0, 0, -1).Format(time.DateOnly))
	}
	set("q", f.Q)
	return q
}

func (f PairFilter) params(orgID uuid.UUID) db.DatasetListPairIDsByFilterParams {
	p := db.DatasetListPairIDsByFilterParams{OrgID: orgID, Tag: f.Tag, MinStrength: float32(f.MinStrength), Q: f.Q, RowLimit: MaxFilterAdd + 1}
	if f.Method != "" {
		p.Method = db.NullPairMethod{PairMethod: db.PairMethod(f.Method), Valid: true}
	}
	if !f.From.IsZero() {
		p.CreatedFrom = &f.From
	}
	if !f.To.IsZero() {
		p.CreatedTo = &f.To
	}
	return p
}

func userID(a audit.Actor) uuid.NullUUID {
	return uuid.NullUUID{UUID: a.ID, Valid: a.Kind == "user" && a.ID != uuid.Nil}
}

func float4(f float64) pgtype.Float4 { return pgtype.Float4{Float32: float32(f), Valid: true} }
