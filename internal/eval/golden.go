// Package eval evaluates models against curated data: golden sets (frozen
// dataset versions marked as evaluation sets) and what an evaluation reads
// from them.
package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/scorers"
)

// Limits on input.
const (
	MaxName      = 200
	MaxSplitTags = 8
)

// DefaultSplitTags are the seed's splits: a curated gold set and red-team
// prompts, reported apart.
var DefaultSplitTags = []string{"gold_set", "red_team"}

// SplitAll is the split of an item that carries none of the set's split
// tags.
const SplitAll = "all"

var tagPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Service does the work; its fields are its dependencies.
type Service struct {
	// Gates is the promotion gate: GetGate, SetGate, Status, Override.
	*Gates
	Pool *pgxpool.Pool
	// Jobs inserts a run's job in the transaction that records the run.
	Jobs jobq.Inserter
	// Runner answers and scores; nil refuses to start runs.
	Runner Runner
}

// New builds the evaluation service on the promotion gates: jobs starts
// runs, and runner answers and scores them (nil refuses to start runs).
func New(pool *pgxpool.Pool, gates *Gates, jobs jobq.Inserter, runner Runner) *Service {
	return &Service{Gates: gates, Pool: pool, Jobs: jobs, Runner: runner}
}

// GoldenSet is a frozen dataset version marked as an evaluation set.
type GoldenSet struct {
	VersionID     uuid.UUID `json:"version_id"`
	Name          string    `json:"name"`
	SplitTags     []string  `json:"split_tags"`
	DatasetID     uuid.UUID `json:"dataset_id"`
	DatasetName   string    `json:"dataset_name"`
	VersionNumber int       `json:"version_number"`
	Kind          string    `json:"kind"`
	Items         int       `json:"items"`
	CreatedBy     string    `json:"created_by"`
	CreatedAt     time.Time `json:"created_at"`
}

// Mark makes a frozen version a golden set, or renames it and changes its
// split tags when it is one already. Only frozen versions can be: an
// evaluation must ask the same prompts every time.
func (s *Service) Mark(ctx context.Context, actor audit.Actor, orgID, versionID uuid.UUID, name string, splitTags []string) (GoldenSet, error) {
	v := &errs.Invalid{}
	name = strings.TrimSpace(name)
	v.Text("name", name, MaxName, true)
	if len(splitTags) > MaxSplitTags {
		v.Add("split_tags", "at most %d", MaxSplitTags)
	}
	for i, t := range splitTags {
		if !tagPattern.MatchString(t) {
			v.Add(fmt.Sprintf("split_tags[%d]", i), "must be a tag: lower-case letters, digits, '_' or '-'")
		}
	}
	if err := v.Err(); err != nil {
		return GoldenSet{}, err
	}
	slices.Sort(splitTags)
	splitTags = slices.Compact(splitTags)
	if splitTags == nil {
		splitTags = []string{} // no split tags: an empty list, which the column requires
	}
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if _, err := q.DatasetVersionGet(ctx, db.DatasetVersionGetParams{OrgID: orgID, ID: versionID}); errors.Is(err, pgx.ErrNoRows) {
			return errs.InvalidField("version_id", "is not a frozen dataset version of this organisation")
		} else if err != nil {
			return err
		}
		if _, err := q.GoldenSetInsertOrUpdate(ctx, db.GoldenSetInsertOrUpdateParams{VersionID: versionID, OrgID: orgID, Name: name,
			SplitTags: splitTags, CreatedByLabel: actor.Label}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "golden_set.mark", TargetType: "dataset_version",
			TargetID: versionID.String(), Details: map[string]any{"name": name, "split_tags": splitTags}})
	})
	if err != nil {
		return GoldenSet{}, err
	}
	return s.Get(ctx, orgID, versionID)
}

// Unmark stops listing a version as a golden set; the version and the
// evaluations run on it stay.
func (s *Service) Unmark(ctx context.Context, actor audit.Actor, orgID, versionID uuid.UUID) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		n, err := q.GoldenSetDelete(ctx, db.GoldenSetDeleteParams{OrgID: orgID, VersionID: versionID})
		if err != nil {
			return err
		}
		if n == 0 {
			return errs.ErrNotFound
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "golden_set.unmark", TargetType: "dataset_version",
			TargetID: versionID.String()})
	})
}

// IsFrozen reports whether id is a frozen dataset version of the
// organisation: any of them may be an evaluation's golden set, marked as
// one or not.
func (s *Service) IsFrozen(ctx context.Context, orgID, id uuid.UUID) (bool, error) {
	_, err := db.New(s.Pool).DatasetVersionGet(ctx, db.DatasetVersionGetParams{OrgID: orgID, ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// GoldenSets lists the organisation's golden sets, newest first.
func (s *Service) GoldenSets(ctx context.Context, orgID uuid.UUID) ([]GoldenSet, error) {
	return s.goldenSets(ctx, orgID, uuid.NullUUID{})
}

// goldenSets lists golden sets, all of them or the one of a version.
func (s *Service) goldenSets(ctx context.Context, orgID uuid.UUID, version uuid.NullUUID) ([]GoldenSet, error) {
	rows, err := db.New(s.Pool).GoldenSetList(ctx, db.GoldenSetListParams{OrgID: orgID, VersionID: version})
	if err != nil {
		return nil, err
	}
	out := make([]GoldenSet, 0, len(rows))
	for _, r := range rows {
		out = append(out, GoldenSet{VersionID: r.GoldenSet.VersionID, Name: r.GoldenSet.Name, SplitTags: r.GoldenSet.SplitTags,
			DatasetID: r.DatasetID, DatasetName: r.DatasetName, VersionNumber: int(r.VersionNumber), Kind: r.Kind,
			Items: int(r.ItemCount), CreatedBy: r.GoldenSet.CreatedByLabel, CreatedAt: r.GoldenSet.CreatedAt})
	}
	return out, nil
}

// Get returns one golden set, or errs.ErrNotFound.
func (s *Service) Get(ctx context.Context, orgID, versionID uuid.UUID) (GoldenSet, error) {
	sets, err := s.goldenSets(ctx, orgID, uuid.NullUUID{UUID: versionID, Valid: true})
	if err != nil {
		return GoldenSet{}, err
	}
	if len(sets) == 0 {
		return GoldenSet{}, errs.ErrNotFound
	}
	return sets[0], nil
}

// Item is one prompt of an evaluation set: the conversation up to the
// answer to give, and the reference answer (the curator's correction where
// there was one, or a pair's chosen answer).
type Item struct {
	SourceID uuid.UUID        `json:"source_id"`
	Split    string           `json:"split"`
	System   string           `json:"system,omitempty"`
	Messages []export.Message `json:"messages"`
	Query    string           `json:"query"`
	// Context are the documents the answer was to draw on.
	Context   []string `json:"context,omitempty"`
	Reference string   `json:"reference"`
}

// Items reads a frozen version's items as prompts and references, each in
// the split of the first split tag it carries (or SplitAll). Any frozen
// version of the organisation can be evaluated on; splitTags nil uses none.
func (s *Service) Items(ctx context.Context, orgID, versionID uuid.UUID, splitTags []string) ([]Item, error) {
	rows, err := db.New(s.Pool).GoldenSetListItems(ctx, db.GoldenSetListItemsParams{OrgID: orgID, VersionID: versionID})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		if _, err := db.New(s.Pool).DatasetVersionGet(ctx, db.DatasetVersionGetParams{OrgID: orgID, ID: versionID}); errors.Is(err, pgx.ErrNoRows) {
			return nil, errs.InvalidField("golden_set_version_id", "is not a frozen dataset version of this organisation")
		}
	}
	out := make([]Item, 0, len(rows))
	for _, r := range rows {
		var ex datasets.Example
		if err := json.Unmarshal(r.Content, &ex); err != nil {
			return nil, fmt.Errorf("version item %s: %w", r.SourceID, err)
		}
		it, ok := itemOf(ex)
		if !ok {
			continue // nothing to ask: no user turn
		}
		it.SourceID, it.Split, it.Context = r.SourceID, SplitAll, scorers.Documents(r.Documents)
		for _, t := range splitTags {
			if slices.Contains(r.Tags, t) {
				it.Split = t
				break
			}
		}
		out = append(out, it)
	}
	return out, nil
}

// itemOf splits an example into the prompt to ask and the answer to
// compare with: an SFT conversation's last assistant turn, or a pair's
// chosen answer.
func itemOf(ex datasets.Example) (Item, bool) {
	it := Item{System: ex.System}
	switch {
	case len(ex.Prompt) > 0: // a preference pair
		it.Messages, it.Reference = ex.Prompt, ex.Chosen
	case len(ex.Messages) > 0:
		last := len(ex.Messages) - 1
		if ex.Messages[last].Role == "assistant" {
			it.Messages, it.Reference = ex.Messages[:last], ex.Messages[last].Content
		} else {
			it.Messages = ex.Messages
		}
	}
	for i := len(it.Messages) - 1; i >= 0; i-- {
		if it.Messages[i].Role == "user" {
			it.Query = it.Messages[i].Content
			return it, true
		}
	}
	return it, false
}

// Frozen is a frozen version a golden set can be made of.
type Frozen struct {
	ID    uuid.UUID
	Label string // "Support answers v3 (29 items)"
}

// Frozen lists the organisation's frozen versions, newest first.
func (s *Service) Frozen(ctx context.Context, orgID uuid.UUID) ([]Frozen, error) {
	rows, err := db.New(s.Pool).DatasetVersionListForOrg(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Frozen, 0, len(rows))
	for _, r := range rows {
		out = append(out, Frozen{ID: r.ID, Label: fmt.Sprintf("%s v%d (%d items)", r.DatasetName, r.Number, r.ItemCount)})
	}
	return out, nil
}
