package finetune

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/pricing"
)

// PriceTable returns the organisation's prices in force. The first read
// copies the compiled defaults in, so every price an estimate uses is a
// stored row it can name.
func (s *Service) PriceTable(ctx context.Context, orgID uuid.UUID) (pricing.Table, error) {
	q := db.New(s.Pool)
	if err := seedPrices(ctx, q, orgID); err != nil {
		return pricing.Table{}, err
	}
	return priceTable(ctx, q, orgID)
}

func seedPrices(ctx context.Context, q *db.Queries, orgID uuid.UUID) error {
	d := pricing.Defaults()
	p := db.FineTunePriceInsertDefaultsParams{OrgID: orgID, EffectiveDate: date(pricing.DefaultsDate)}
	for _, price := range d.Prices {
		p.Providers = append(p.Providers, price.Provider)
		p.BaseModels = append(p.BaseModels, price.BaseModel)
		p.PerMillions = append(p.PerMillions, int64(pricing.Dollars(price.PerMillion)))
	}
	return q.FineTunePriceInsertDefaults(ctx, p)
}

func priceTable(ctx context.Context, q *db.Queries, orgID uuid.UUID) (pricing.Table, error) {
	rows, err := q.FineTunePriceList(ctx, orgID)
	if err != nil {
		return pricing.Table{}, err
	}
	t := pricing.Table{Prices: make([]pricing.Price, len(rows))}
	for i, r := range rows {
		t.Prices[i] = priceOf(r)
	}
	return t, nil
}

func priceOf(r db.FineTuningPrice) pricing.Price {
	return pricing.Price{ID: r.ID, Provider: r.Provider, BaseModel: r.BaseModel, PerMillion: pricing.Micros(r.PerMillion).Dollars(),
		Date: r.EffectiveDate.Time.Format(time.DateOnly), SetBy: r.CreatedByLabel, SetAt: r.CreatedAt}
}

// date is a checked YYYY-MM-DD as Postgres takes it.
func date(s string) pgtype.Date {
	t, err := time.Parse(time.DateOnly, s)
	return pgtype.Date{Time: t, Valid: err == nil}
}

// SetPrices makes e the organisation's price table: a price it adds or
// changes gets a new row dated e.Date, one it leaves out is retired, and
// one whose amount stays keeps its row and date. Who did it and each
// change, old → new, go to the audit log in the same transaction. A bad
// edit is an *errs.Invalid and changes nothing; an edit that changes no
// price writes nothing and returns no changes.
func (s *Service) SetPrices(ctx context.Context, actor audit.Actor, orgID uuid.UUID, e pricing.Edit) ([]pricing.Change, error) {
	if err := e.Check(); err != nil {
		return nil, err
	}
	var changes []pricing.Change
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := seedPrices(ctx, q, orgID); err != nil {
			return err
		}
		// The budget row serialises the organisation's edits of its money
		// settings (and its launches), so two edits at once do not both
		// retire the same row.
		if err := q.FineTuneBudgetInsertDefault(ctx, db.FineTuneBudgetInsertDefaultParams{OrgID: orgID, Monthly: int64(s.DefaultBudget)}); err != nil {
			return err
		}
		if _, err := q.FineTuneBudgetGetForUpdate(ctx, orgID); err != nil {
			return err
		}
		current, err := priceTable(ctx, q, orgID)
		if err != nil {
			return err
		}
		changes = pricing.Diff(current, e)
		if len(changes) == 0 {
			return nil
		}
		var details []map[string]any
		for _, c := range changes {
			d := map[string]any{}
			if c.Old != nil {
				if err := q.FineTunePriceUpdateSuperseded(ctx, db.FineTunePriceUpdateSupersededParams{OrgID: orgID, ID: c.Old.ID}); err != nil {
					return err
				}
				d["provider"], d["base_model"], d["old_usd_per_million"], d["old_date"] = c.Old.Provider, c.Old.BaseModel, c.Old.PerMillion, c.Old.Date
			}
			if c.New != nil {
				row, err := q.FineTunePriceInsert(ctx, db.FineTunePriceInsertParams{OrgID: orgID, Provider: c.New.Provider, BaseModel: c.New.BaseModel,
					PerMillion: int64(pricing.Dollars(c.New.PerMillion)), EffectiveDate: date(e.Date), CreatedByLabel: actor.Label})
				if err != nil {
					return err
				}
				*c.New = priceOf(row)
				d["provider"], d["base_model"], d["new_usd_per_million"], d["new_date"] = c.New.Provider, c.New.BaseModel, c.New.PerMillion, c.New.Date
			}
			details = append(details, d)
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "finetune.prices", TargetType: "price_table",
			TargetID: orgID.String(), Details: map[string]any{"date": e.Date, "changes": details}})
	})
	if err != nil {
		return nil, err
	}
	return changes, nil
}
