package finetune

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/pricing"
)

// Budget is an organisation's fine-tuning money this month.
type Budget struct {
	Monthly pricing.Micros
	// Spent is the actual cost of this month's finished jobs and the
	// estimate of those still under way.
	Spent pricing.Micros
}

// Left is what remains this month, never below zero.
func (b Budget) Left() pricing.Micros { return max(b.Monthly-b.Spent, 0) }

// Budget returns the organisation's budget and this month's spending.
func (s *Service) Budget(ctx context.Context, orgID uuid.UUID) (Budget, error) {
	return s.budget(ctx, db.New(s.Pool), orgID)
}

func (s *Service) budget(ctx context.Context, q *db.Queries, orgID uuid.UUID) (Budget, error) {
	b := Budget{Monthly: s.DefaultBudget}
	row, err := q.FineTuneBudgetGet(ctx, orgID)
	switch {
	case err == nil:
		b.Monthly = pricing.Micros(row.Monthly)
	case !errors.Is(err, pgx.ErrNoRows):
		return b, err
	}
	spent, err := q.FineTuneJobGetSpent(ctx, db.FineTuneJobGetSpentParams{OrgID: orgID, Since: monthStart(s.now())})
	b.Spent = pricing.Micros(spent)
	return b, err
}

// maxBudget bounds a monthly budget at a million dollars, well past any
// real one, so a slipped digit is caught.
const maxBudget = pricing.Micros(1_000_000 * 1e6)

// SetBudget sets the organisation's monthly budget.
func (s *Service) SetBudget(ctx context.Context, actor audit.Actor, orgID uuid.UUID, monthly pricing.Micros) error {
	if monthly < 0 || monthly > maxBudget {
		return errs.InvalidField("monthly_budget", "must be from 0 to %s", maxBudget)
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.FineTuneBudgetUpdate(ctx, db.FineTuneBudgetUpdateParams{OrgID: orgID, Monthly: int64(monthly), UpdatedByLabel: actor.Label}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "finetune.budget", TargetType: "organization",
			TargetID: orgID.String(), Details: map[string]any{"monthly_usd": monthly.Dollars()}})
	})
}
