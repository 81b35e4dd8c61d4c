package datasets

import (
	"context"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// typesOf are the dataset types that hold examples of a kind.
func typesOf(kind string) []string {
	if kind == KindSFT {
		return []string{TypeInstructionTuning}
	}
	return []string{TypePreferencePairs, TypeDPO}
}

// Open lists the datasets a selection of the kind ("preference": pairs,
// "sft": feedback) can go into as it is: draft or curating, of a type that
// holds that kind, by name.
func (s *Service) Open(ctx context.Context, orgID uuid.UUID, kind string) ([]db.DatasetListOpenRow, error) {
	return db.New(s.Pool).DatasetListOpen(ctx, db.DatasetListOpenParams{OrgID: orgID, Types: typesOf(kind)})
}

// Added is what adding a selection did.
type Added struct {
	Dataset db.TrainingDataset
	Added   int // new members
	Already int // selected items that were members before
}

// AddSelected adds what a user ticked (pairs on the pairs list, kind
// "preference"; feedback on the queue, kind "sft") to an open dataset. It
// refuses the whole selection, changing nothing, when the dataset holds
// the other kind, is frozen or archived, or any item is not eligible;
// otherwise it adds the members as AddMembers does.
func (s *Service) AddSelected(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, kind string, ids []uuid.UUID) (Added, error) {
	var out Added
	unique := map[uuid.UUID]bool{}
	for _, id := range ids {
		unique[id] = true
	}
	n, err := s.addMembers(ctx, actor, orgID, id, ids, func(d db.TrainingDataset) error {
		out.Dataset = d
		if got := KindOf(string(d.DatasetType)); got != kind {
			holds, selected := "approved or corrected feedback", "preference pairs"
			if got == KindPreference {
				holds, selected = "preference pairs", "feedback items"
			}
			return errs.InvalidField("dataset", "%s holds %s, not %s: pick a dataset of that kind", d.Name, holds, selected)
		}
		if d.Status == StatusReady || d.Status == StatusExported {
			return &errs.Conflict{Message: d.Name + " is frozen (" + string(d.Status) + "): start curating it again on its page before adding to it"}
		}
		return nil
	})
	out.Added, out.Already = n, len(unique)-n
	return out, err
}

// TypesFor lists the dataset types a selection of the kind can start: a
// new dataset for pairs holds preference pairs (or DPO), one for feedback
// is for instruction tuning.
func TypesFor(kind string) []string { return typesOf(kind) }

// CreateWithSelected creates a draft dataset and adds what a user ticked
// to it, in one transaction, so a list's "Add to dataset…" can start a
// dataset without leaving the list. Everything is refused, and no dataset
// is left behind, when the settings are invalid, the type does not hold
// the kind, or any item is not eligible (as AddSelected refuses it).
func (s *Service) CreateWithSelected(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewDataset, kind string, ids []uuid.UUID) (Added, error) {
	v := &errs.Invalid{}
	if types := typesOf(kind); !slices.Contains(types, in.Type) {
		v.Add("dataset_type", "must be one of %s for %s", strings.Join(types, ", "), kindNoun(kind))
	}
	in.validate(v, in.Type)
	switch {
	case len(ids) == 0:
		v.Add("ids", "name at least one pair or feedback item")
	case len(ids) > MaxIDs:
		v.Add("ids", "at most %d per request, not %d", MaxIDs, len(ids))
	}
	if v.Has() {
		return Added{}, v
	}
	var out Added
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		d, err := insertDataset(ctx, q, actor, orgID, in)
		if err != nil {
			return err
		}
		if err := checkEligible(ctx, q, orgID, d, ids); err != nil {
			return err
		}
		n, err := insertMembers(ctx, q, orgID, d, ids)
		if err != nil {
			return err
		}
		if d, err = q.DatasetUpdateStatus(ctx, db.DatasetUpdateStatusParams{OrgID: orgID, ID: d.ID, Status: StatusCurating}); err != nil {
			return err
		}
		out = Added{Dataset: d, Added: int(n)}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "dataset.members_add", TargetType: "dataset",
			TargetID: d.ID.String(), Details: map[string]any{"changed": n, "from_status": StatusDraft}})
	})
	if err != nil {
		return Added{}, err
	}
	return out, nil
}

// kindNoun is what a selection of the kind is, in words.
func kindNoun(kind string) string {
	if kind == KindSFT {
		return "feedback items"
	}
	return "preference pairs"
}
