package feedback

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// resolver finds what items name by reference (a logged best-of-N answer,
// a curator by address, the organisation by name) in one organisation,
// each name looked up once however many items of a batch carry it.
type resolver struct {
	q     *db.Queries
	orgID uuid.UUID
	org   *db.Organization
	users map[string]uuid.UUID // lower-case address → user; uuid.Nil: none
}

func newResolver(q *db.Queries, orgID uuid.UUID) *resolver {
	return &resolver{q: q, orgID: orgID, users: map[string]uuid.UUID{}}
}

// resolve checks and fills in what the item names, recording a message per
// field under prefix; the error is the database's.
func (r *resolver) resolve(ctx context.Context, v *errs.Invalid, it *Item, prefix string) error {
	if it.Organization != "" {
		if r.org == nil {
			o, err := r.q.OrgGet(ctx, r.orgID)
			if err != nil {
				return err
			}
			r.org = &o
		}
		if !strings.EqualFold(it.Organization, r.org.Name) && !strings.EqualFold(it.Organization, r.org.Slug) {
			v.Add(prefix+"organization", "is %q, not this organisation (%s, %s): feedback goes to the organisation that sends it",
				it.Organization, r.org.Name, r.org.Slug)
		}
	}
	if it.CuratorEmail != "" {
		key := strings.ToLower(it.CuratorEmail)
		id, seen := r.users[key]
		if !seen {
			u, err := r.q.UserGetByEmail(ctx, it.CuratorEmail)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return err
			case u.OrgID == r.orgID:
				id = u.ID
			}
			r.users[key] = id
		}
		if id == uuid.Nil {
			v.Add(prefix+"curator_email", "no user of this organisation has the address %q", it.CuratorEmail)
		}
		it.givenBy = id
	}
	if it.ResponseID != "" {
		return r.answer(ctx, v, it, prefix)
	}
	return nil
}

// answer fills in the query, answer and context of the logged best-of-N
// answer the item names, where the item has none. An item that carries its
// answer may name one Curate never logged: its id is kept as the trace.
func (r *resolver) answer(ctx context.Context, v *errs.Invalid, it *Item, prefix string) error {
	id, err := uuid.Parse(it.ResponseID)
	var row db.BestOfNResponse
	if err == nil {
		row, err = r.q.SelectionGet(ctx, db.SelectionGetParams{OrgID: r.orgID, ID: id})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	if err != nil {
		if strings.TrimSpace(it.Response) == "" {
			v.Add(prefix+it.fieldName("trace_id"), "names no answer of this organisation's best-of-N log (POST /api/best-of-n answers its response_id); send the answer as response")
		}
		return nil
	}
	if strings.TrimSpace(it.Query) == "" {
		it.Query = row.Query
	}
	if strings.TrimSpace(it.Response) == "" {
		var cands []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(row.Candidates, &cands); err != nil {
			return err
		}
		if int(row.Selected) >= len(cands) {
			return errors.New("feedback: a logged best-of-N answer selects a candidate it lacks")
		}
		it.Response = cands[row.Selected].Text
	}
	merged, err := mergeContext(it.Context, row.Context)
	if err != nil {
		return err
	}
	it.Context = merged
	return nil
}

// mergeContext is the item's context with what the logged answer's context
// adds: the item's own keys stand.
func mergeContext(item, logged json.RawMessage) (json.RawMessage, error) {
	var add map[string]json.RawMessage
	if err := json.Unmarshal(logged, &add); err != nil || len(add) == 0 {
		return item, nil
	}
	if !isSet(item) {
		return logged, nil
	}
	var own map[string]json.RawMessage
	if json.Unmarshal(item, &own) != nil {
		return item, nil // Validate says what a context must be
	}
	for k, val := range add {
		if _, ok := own[k]; !ok {
			own[k] = val
		}
	}
	return json.Marshal(own)
}
