package datasets

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/validate"
)

// ReportFromFacts validates a frozen version through stored facts, as
// every report does, without the stored whole report in front of it.
func ReportFromFacts(ctx context.Context, pool *pgxpool.Pool, ver db.DatasetVersion, f export.Format, baseModel string, maskPII bool) (*validate.Report, error) {
	var rep *validate.Report
	err := whileComputing(ctx, func() error {
		var err error
		rep, err = computeVersionReport(ctx, pool, ver, f, baseModel, maskPII)
		return err
	})
	return rep, err
}

// ReportFromScratch validates every item of a frozen version by itself,
// reading and storing no facts.
func ReportFromScratch(ctx context.Context, pool *pgxpool.Pool, ver db.DatasetVersion, f export.Format, baseModel string, maskPII bool) (*validate.Report, error) {
	c, err := newChecker(f, baseModel, ver.Kind, maskPII)
	if err != nil {
		return nil, err
	}
	for _, split := range Splits {
		err := eachVersionItem(ctx, db.New(pool), ver.ID, split, nil, func(e Example) error {
			c.v.AddFacts(c.facts(e))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return c.v.Report(), nil
}

// SetFactsRange makes reports stream n items a query until the test ends.
func SetFactsRange(t *testing.T, n int32) {
	old := factsRange
	factsRange = n
	t.Cleanup(func() { factsRange = old })
}
