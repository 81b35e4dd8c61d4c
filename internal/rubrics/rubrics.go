// Package rubrics is review rubrics: the questions a team asks of an item
// (a label, several labels, a rating, a ranking, a text, spans of the
// answer), each required or optional, with guidelines shown beside the
// item. A rubric is versioned: editing it adds a version, and an answer
// records the version it answered. Answers are checked question by
// question and stored whole or not at all.
package rubrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/judge"
)

// Kinds of question.
const (
	KindLabel   = "label"   // one of the options
	KindLabels  = "labels"  // any of the options
	KindRating  = "rating"  // an integer from min to max, options its anchors
	KindRanking = "ranking" // the options (candidate answers) in order, best first
	KindText    = "text"    // free text
	KindSpan    = "span"    // character ranges of the answer, each with a label
)

// Kinds lists every kind of question.
var Kinds = []string{KindLabel, KindLabels, KindRating, KindRanking, KindText, KindSpan}

// Limits.
const (
	MaxName        = 200
	MaxGuidelines  = 20000
	MaxQuestions   = 30
	MaxOptions     = 50
	MaxOption      = 200
	MaxTitle       = 300
	MaxDescription = 2000
	MaxRatingSteps = 11
	MaxText        = 10000
	MaxSpans       = 200
	MaxTags        = 20
	MaxListed      = 200
)

// Question is one question of a rubric.
type Question struct {
	Key         string   `json:"key"`
	Kind        string   `json:"kind"`
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	Options     []string `json:"options,omitempty"`
	Min         *int     `json:"min,omitempty"`
	Max         *int     `json:"max,omitempty"`
	// Level is the level agreement takes for a rating: ordinal unless
	// declared interval.
	Level    string `json:"level,omitempty"`
	Required bool   `json:"required"`
}

// Bounds is a rating's lowest and highest value.
func (q Question) Bounds() (int, int) {
	lo, hi := 1, 5
	if q.Min != nil {
		lo = *q.Min
	}
	if q.Max != nil {
		hi = *q.Max
	}
	return lo, hi
}

// AppliesTo says which items a rubric is asked of: those with one of the
// tags; every item when none is given.
type AppliesTo struct {
	Tags []string `json:"tags"`
}

// Rubric is one version of a rubric.
type Rubric struct {
	ID         uuid.UUID  `json:"id"`
	Version    int        `json:"version"`
	Name       string     `json:"name"`
	Guidelines string     `json:"guidelines"`
	Questions  []Question `json:"questions"`
	AppliesTo  AppliesTo  `json:"applies_to"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
}

// Question is the rubric's question with the key, if any.
func (r Rubric) Question(key string) (Question, bool) {
	for _, q := range r.Questions {
		if q.Key == key {
			return q, true
		}
	}
	return Question{}, false
}

// Input is a rubric as an admin writes it.
type Input struct {
	Name       string
	Guidelines string
	Questions  []Question
	AppliesTo  AppliesTo
}

var keyPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// validate checks a rubric and tidies what it may.
func (in *Input) validate() error {
	v := &errs.Invalid{}
	in.Name = strings.TrimSpace(in.Name)
	if v.Text("name", in.Name, MaxName*4, true) && utf8.RuneCountInString(in.Name) > MaxName {
		v.Add("name", "at most %d characters", MaxName)
	}
	in.Guidelines = strings.ReplaceAll(in.Guidelines, "\r\n", "\n")
	v.Text("guidelines", in.Guidelines, MaxGuidelines, false)
	switch {
	case len(in.Questions) == 0:
		v.Add("questions", "ask at least one question")
	case len(in.Questions) > MaxQuestions:
		v.Add("questions", "at most %d questions, not %d", MaxQuestions, len(in.Questions))
	}
	seen := map[string]bool{}
	for i := range in.Questions {
		if i >= MaxQuestions {
			break
		}
		q := &in.Questions[i]
		at := fmt.Sprintf("questions[%d].", i)
		q.Key = strings.TrimSpace(q.Key)
		switch {
		case !keyPattern.MatchString(q.Key):
			v.Add(at+"key", "must be lower-case letters, digits and _, starting with a letter, at most 64")
		case seen[q.Key]:
			v.Add(at+"key", "%q is the key of an earlier question", q.Key)
		}
		seen[q.Key] = true
		if !slices.Contains(Kinds, q.Kind) {
			v.Add(at+"kind", "must be one of %s", strings.Join(Kinds, ", "))
		}
		q.Title = strings.TrimSpace(q.Title)
		if q.Title == "" {
			q.Title = q.Key
		}
		v.Text(at+"title", q.Title, MaxTitle, true)
		v.Text(at+"description", q.Description, MaxDescription, false)
		if len(q.Options) > MaxOptions {
			v.Add(at+"options", "at most %d options, not %d", MaxOptions, len(q.Options))
		}
		opts := map[string]bool{}
		for j, o := range q.Options {
			o = strings.TrimSpace(o)
			q.Options[j] = o
			if !v.Text(fmt.Sprintf("%soptions[%d]", at, j), o, MaxOption, true) {
				break
			}
			if opts[o] {
				v.Add(fmt.Sprintf("%soptions[%d]", at, j), "%q is given twice", o)
				break
			}
			opts[o] = true
		}
		switch q.Kind {
		case KindLabel, KindLabels, KindRanking:
			if len(q.Options) < 2 {
				v.Add(at+"options", "a %s question needs 2 options or more", q.Kind)
			}
		case KindRating:
			lo, hi := q.Bounds()
			switch {
			case hi <= lo:
				v.Add(at+"max", "must be above min (%d)", lo)
			case hi-lo+1 > MaxRatingSteps:
				v.Add(at+"max", "at most %d steps from min to max", MaxRatingSteps)
			case len(q.Options) > 0 && len(q.Options) != hi-lo+1:
				v.Add(at+"options", "a rating's options are its anchors, one per step: %d, not %d", hi-lo+1, len(q.Options))
			}
			q.Min, q.Max = &lo, &hi
		}
		switch q.Level {
		case "":
		case "interval", "ordinal":
			if q.Kind != KindRating {
				v.Add(at+"level", "applies to a rating: other questions take the level their kind has")
			}
		default:
			v.Add(at+"level", "must be ordinal or interval")
		}
		if q.Kind != KindRating && (q.Min != nil || q.Max != nil) && q.Kind != KindLabels && q.Kind != KindText {
			v.Add(at+"min", "applies to a rating, a labels question (how many to choose) or a text (how long)")
		}
	}
	tags, msg := feedback.NormalizeTags(in.AppliesTo.Tags)
	switch {
	case msg != "":
		v.Add("applies_to.tags", "%s", msg)
	case len(tags) > MaxTags:
		v.Add("applies_to.tags", "at most %d tags", MaxTags)
	}
	in.AppliesTo.Tags = tags
	if in.AppliesTo.Tags == nil {
		in.AppliesTo.Tags = []string{}
	}
	return v.Err()
}

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool *pgxpool.Pool
	// Judge answers rubrics' label and rating questions (AskJudge); nil
	// where no judge is configured.
	Judge *judge.Service
}

// New builds rubrics on pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// FromVersion is a stored version of a rubric as the service shows it.
func FromVersion(v db.RubricVersion) (Rubric, error) {
	r := Rubric{ID: v.RubricID, Version: int(v.Version), Name: v.Name, Guidelines: v.Guidelines,
		AppliesTo: AppliesTo{Tags: v.AppliesTags}, CreatedBy: v.CreatedByLabel, CreatedAt: v.CreatedAt}
	if err := json.Unmarshal(v.Questions, &r.Questions); err != nil {
		return r, fmt.Errorf("rubric %s v%d: %w", v.RubricID, v.Version, err)
	}
	if r.AppliesTo.Tags == nil {
		r.AppliesTo.Tags = []string{}
	}
	return r, nil
}

// Create defines a rubric: its first version.
func (s *Service) Create(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in Input) (Rubric, error) {
	if err := in.validate(); err != nil {
		return Rubric{}, err
	}
	var out Rubric
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		r, err := q.RubricInsert(ctx, db.RubricInsertParams{OrgID: orgID, Name: in.Name, AppliesTags: in.AppliesTo.Tags, CreatedByLabel: actor.Label})
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.InvalidField("name", "a rubric named %q exists already: edit it to make a new version", in.Name)
		}
		if err != nil {
			return err
		}
		if out, err = s.insertVersion(ctx, q, actor, orgID, r, in); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "rubric.create", TargetType: "rubric",
			TargetID: r.ID.String(), Details: map[string]any{"name": in.Name, "version": out.Version, "questions": len(in.Questions)}})
	})
	return out, err
}

// Update edits a rubric: a new version, the one asked from then on.
// Answers given to earlier versions keep the version they answered.
func (s *Service) Update(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, in Input) (Rubric, error) {
	if err := in.validate(); err != nil {
		return Rubric{}, err
	}
	var out Rubric
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if _, err := q.RubricGetForUpdate(ctx, db.RubricGetForUpdateParams{OrgID: orgID, ID: id}); err != nil {
			return errs.NotFound(err)
		}
		r, err := q.RubricUpdateVersion(ctx, db.RubricUpdateVersionParams{OrgID: orgID, ID: id, Name: in.Name, AppliesTags: in.AppliesTo.Tags})
		if err != nil {
			var unique interface{ SQLState() string }
			if errors.As(err, &unique) && unique.SQLState() == "23505" {
				return errs.InvalidField("name", "another rubric is named %q", in.Name)
			}
			return err
		}
		if out, err = s.insertVersion(ctx, q, actor, orgID, r, in); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "rubric.update", TargetType: "rubric",
			TargetID: r.ID.String(), Details: map[string]any{"name": in.Name, "version": out.Version}})
	})
	return out, err
}

func (s *Service) insertVersion(ctx context.Context, q *db.Queries, actor audit.Actor, orgID uuid.UUID, r db.Rubric, in Input) (Rubric, error) {
	questions, err := json.Marshal(in.Questions)
	if err != nil {
		return Rubric{}, err
	}
	v, err := q.RubricVersionInsert(ctx, db.RubricVersionInsertParams{OrgID: orgID, RubricID: r.ID, Version: r.Version, Name: in.Name,
		Guidelines: in.Guidelines, Questions: questions, AppliesTags: in.AppliesTo.Tags, CreatedByLabel: actor.Label})
	if err != nil {
		return Rubric{}, err
	}
	return FromVersion(v)
}

// Get is a rubric at its current version.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Rubric, error) {
	v, err := db.New(s.Pool).RubricGet(ctx, db.RubricGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Rubric{}, errs.NotFound(err)
	}
	return FromVersion(v)
}

// GetVersion is one version of a rubric.
func (s *Service) GetVersion(ctx context.Context, orgID, id uuid.UUID, version int) (Rubric, error) {
	v, err := db.New(s.Pool).RubricGetVersion(ctx, db.RubricGetVersionParams{OrgID: orgID, RubricID: id, Version: int32(version)})
	if err != nil {
		return Rubric{}, errs.NotFound(err)
	}
	return FromVersion(v)
}

// List is the organisation's rubrics at their current versions.
func (s *Service) List(ctx context.Context, orgID uuid.UUID) ([]Rubric, error) {
	rows, err := db.New(s.Pool).RubricListByOrg(ctx, db.RubricListByOrgParams{OrgID: orgID, RowLimit: MaxListed})
	if err != nil {
		return nil, err
	}
	return toRubrics(rows)
}

// ForTags is the rubrics asked of an item with these tags.
func (s *Service) ForTags(ctx context.Context, orgID uuid.UUID, tags []string) ([]Rubric, error) {
	if tags == nil {
		tags = []string{}
	}
	rows, err := db.New(s.Pool).RubricListForTags(ctx, db.RubricListForTagsParams{OrgID: orgID, Tags: tags, RowLimit: MaxListed})
	if err != nil {
		return nil, err
	}
	return toRubrics(rows)
}

func toRubrics(rows []db.RubricVersion) ([]Rubric, error) {
	out := make([]Rubric, 0, len(rows))
	for _, row := range rows {
		r, err := FromVersion(row)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
