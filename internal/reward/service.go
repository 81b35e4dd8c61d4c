package reward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// DefaultName is the formula an evaluation uses when it names none.
const DefaultName = "default"

var formulaName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Service keeps the organisations' reward formulas.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds the reward formula service on pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// Version is one stored version of a named formula.
type Version struct {
	ID      uuid.UUID `json:"id"`
	Name    string    `json:"name"`
	Version int       `json:"version"`
	Weights Formula   `json:"weights"`
	// Formula is the weights written out, for reports.
	Formula   string    `json:"formula"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

func versionOf(r db.RewardFormula) (Version, error) {
	var terms []Term
	if err := json.Unmarshal(r.Weights, &terms); err != nil {
		return Version{}, fmt.Errorf("reward formula %s: %w", r.ID, err)
	}
	f := Formula{Terms: terms}
	return Version{ID: r.ID, Name: r.Name, Version: int(r.Version), Weights: f, Formula: f.String(),
		CreatedBy: r.CreatedByLabel, CreatedAt: r.CreatedAt}, nil
}

// NewVersion is what an admin sends to write a formula's next version.
type NewVersion struct {
	// Name defaults to "default".
	Name string `json:"name"`
	// Weights is a JSON object of scorer names to numbers; it is kept raw
	// so each bad weight can be named (weights.judge).
	Weights json.RawMessage `json:"weights"`
}

// ensureDefault writes the organisation's default formula, version 1, the
// first time the organisation's formulas are used.
func ensureDefault(ctx context.Context, q *db.Queries, orgID uuid.UUID) error {
	w, err := json.Marshal(Default.Terms)
	if err != nil {
		return err
	}
	return q.RewardFormulaInsertDefault(ctx, db.RewardFormulaInsertDefaultParams{OrgID: orgID, Weights: w})
}

// Create writes the next version of a formula (version 1 of a new name),
// audited. Earlier versions stay as they were.
func (s *Service) Create(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewVersion) (Version, error) {
	v := &errs.Invalid{}
	if in.Name == "" {
		in.Name = DefaultName
	}
	if !formulaName.MatchString(in.Name) {
		v.Add("name", "must be lower-case letters, digits, '.', '_' or '-', starting with a letter or digit, at most 64")
	}
	var f Formula
	if len(in.Weights) == 0 {
		v.Add("weights", "is required")
	} else {
		var err error
		if f, err = Parse("weights", in.Weights, Known()); err != nil {
			var inv *errs.Invalid
			if !errors.As(err, &inv) {
				return Version{}, err
			}
			v.Errors = append(v.Errors, inv.Errors...)
		}
	}
	if err := v.Err(); err != nil {
		return Version{}, err
	}
	weights, err := json.Marshal(f.Terms)
	if err != nil {
		return Version{}, err
	}
	var out Version
	err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		// The default's version 1 is the seed's formula even when the
		// organisation's first act is to write its own default.
		if err := ensureDefault(ctx, q, orgID); err != nil {
			return err
		}
		row, err := q.RewardFormulaInsert(ctx, db.RewardFormulaInsertParams{
			OrgID: orgID, Name: in.Name, Weights: weights,
			CreatedBy:      uuid.NullUUID{UUID: actor.ID, Valid: actor.Kind == "user" && actor.ID != uuid.Nil},
			CreatedByLabel: actor.Label,
		})
		if err != nil {
			if errs.IsUnique(err, "reward_formulas_org_id_name_version_key") {
				return &errs.Conflict{Message: fmt.Sprintf("another version of %s was written at the same time; send it again", in.Name)}
			}
			return err
		}
		if out, err = versionOf(row); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "reward_formula.create", TargetType: "reward_formula",
			TargetID: row.ID.String(), Details: map[string]any{"name": out.Name, "version": out.Version, "formula": out.Formula}})
	})
	if err != nil {
		return Version{}, err
	}
	return out, nil
}

// List returns every version of the organisation's formulas, by name and
// newest version first.
func (s *Service) List(ctx context.Context, orgID uuid.UUID) ([]Version, error) {
	q := db.New(s.Pool)
	if err := ensureDefault(ctx, q, orgID); err != nil {
		return nil, err
	}
	rows, err := q.RewardFormulaList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Version, 0, len(rows))
	for _, r := range rows {
		v, err := versionOf(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Latest returns the newest version of a formula by name ("" is the
// default), or errs.ErrNotFound.
func (s *Service) Latest(ctx context.Context, orgID uuid.UUID, name string) (Version, error) {
	if name == "" {
		name = DefaultName
	}
	q := db.New(s.Pool)
	if err := ensureDefault(ctx, q, orgID); err != nil {
		return Version{}, err
	}
	row, err := q.RewardFormulaGetLatest(ctx, db.RewardFormulaGetLatestParams{OrgID: orgID, Name: name})
	if err != nil {
		return Version{}, errs.NotFound(err)
	}
	return versionOf(row)
}

// Get returns one version by id, as a report that names it reads it, or
// errs.ErrNotFound.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Version, error) {
	row, err := db.New(s.Pool).RewardFormulaGet(ctx, db.RewardFormulaGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Version{}, errs.NotFound(err)
	}
	return versionOf(row)
}
