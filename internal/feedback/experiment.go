package feedback

import (
	"context"
	"errors"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// attribute ties feedback sent with an experiment's key to the arm its
// unit (user_id) was first assigned. An experiment_arm the sender gives
// that differs from that arm is counted as a conflict on the experiment
// (the unit saw another arm than the one recorded) and the recorded arm is
// kept. field prefixes messages ("items[3].").
func attribute(ctx context.Context, q *db.Queries, orgID uuid.UUID, it Item, row *db.FeedbackInsertManyParams, field string) error {
	if it.Experiment == "" {
		return nil
	}
	e, err := q.ExperimentGetByKey(ctx, db.ExperimentGetByKeyParams{OrgID: orgID, Key: it.Experiment})
	if errors.Is(err, pgx.ErrNoRows) {
		return errs.InvalidField(field+"experiment", "no experiment has the key %q", it.Experiment)
	}
	if err != nil {
		return err
	}
	if it.UserID == "" {
		return errs.InvalidField(field+"user_id", "is required with an experiment: the unit it assigned an arm")
	}
	x, err := q.ExposureGetLatest(ctx, db.ExposureGetLatestParams{ExperimentID: e.ID, UnitID: it.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return errs.InvalidField(field+"user_id", "was never assigned an arm of %q", it.Experiment)
	}
	if err != nil {
		return err
	}
	arms, err := q.ExperimentArmList(ctx, e.ID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(arms, func(a db.ExperimentArmListRow) bool { return int(a.Idx) == int(x.Arm) })
	if i < 0 {
		return errors.New("feedback: exposure to an arm the experiment lacks")
	}
	if it.ExperimentArm != "" && it.ExperimentArm != arms[i].Name {
		if !slices.ContainsFunc(arms, func(a db.ExperimentArmListRow) bool { return a.Name == it.ExperimentArm }) {
			return errs.InvalidField(field+"experiment_arm", "is not an arm of %q", it.Experiment)
		}
		if err := q.ExperimentUpdateConflicts(ctx, db.ExperimentUpdateConflictsParams{ID: e.ID, Conflicts: 1}); err != nil {
			return err
		}
	}
	row.ExperimentID = uuid.NullUUID{UUID: e.ID, Valid: true}
	row.ExperimentArm = arms[i].Name
	return nil
}
