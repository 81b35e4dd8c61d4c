package datasets

import (
	"context"

	"github.com/google/uuid"

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
