package eval_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/models"
)

// pairedRun records a finished quality run of version on the golden set
// with the given rewards by source (nil: no reward) and safety flags.
func pairedRun(t *testing.T, pool *pgxpool.Pool, org, set, version uuid.UUID, finished string, rewards map[uuid.UUID]*float64, flags map[uuid.UUID]bool) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var id uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO evaluation_runs (org_id, golden_set_version_id, candidate_version_id, status, done, total, mean_reward, finished_at)
		VALUES ($1, $2, $3, 'succeeded', $4, $4, 0.5, $5::timestamptz) RETURNING id`, org, set, version, len(rewards), finished).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for src, r := range rewards {
		split := "all"
		if src == redTeamItem {
			split = eval.RedTeam
		}
		if _, err := pool.Exec(ctx, `INSERT INTO evaluation_items (run_id, source_id, split, query, answer, reward, safety_flag, critique, scores)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, '{"judge": {"value": 0.5, "explanation": "ok"}}')`,
			id, src, split, "q "+src.String(), "answer of "+version.String()[:4], r, flags[src], "critique of "+version.String()[:4]); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

var redTeamItem = uuid.MustParse("00000000-0000-0000-0000-00000000000d")

func f64(x float64) *float64 { return &x }

// Two versions on one golden set: the difference B − A is worked by hand
// from the item rewards, the worst regression comes first, and the filters
// keep the items of their kind.
func TestPairVersions(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	va, err := f.reg.Register(ctx, audit.System, f.org, models.NewVersion{Name: "assist", Version: "1.0.0", ModelID: "ft:a"})
	if err != nil {
		t.Fatal(err)
	}
	vb, err := f.reg.Register(ctx, audit.System, f.org, models.NewVersion{Name: "assist", Version: "1.1.0", ModelID: "ft:b"})
	if err != nil {
		t.Fatal(err)
	}
	i1, i2, i3 := uuid.MustParse("00000000-0000-0000-0000-00000000000a"), uuid.MustParse("00000000-0000-0000-0000-00000000000b"), uuid.MustParse("00000000-0000-0000-0000-00000000000c")
	// Differences B − A: item 1 −0.6 (regressed), item 2 +0.2 (improved),
	// item 3 0, the red-team item +0.1 with a new safety flag.
	pairedRun(t, f.pool, f.org, f.version, va.ID, "2026-11-01", map[uuid.UUID]*float64{i1: f64(0.9), i2: f64(0.5), i3: f64(0.7), redTeamItem: f64(0.4)}, nil)
	pairedRun(t, f.pool, f.org, f.version, vb.ID, "2026-11-02", map[uuid.UUID]*float64{i1: f64(0.3), i2: f64(0.7), i3: f64(0.7), redTeamItem: f64(0.5)},
		map[uuid.UUID]bool{redTeamItem: true})
	got, err := f.svc.PairVersions(ctx, f.org, va.ID, vb.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Mean of (−0.6, 0.2, 0, 0.1) = −0.075.
	if got.GoldenSetVersionID != f.version || got.Difference.N != 4 || math.Abs(*got.Difference.Mean-(-0.075)) > 1e-12 || len(got.Difference.CI) != 2 {
		t.Fatalf("difference %+v on %s", got.Difference, got.GoldenSetVersionID)
	}
	if lo, hi := got.Difference.CI[0], got.Difference.CI[1]; lo < -0.6-1e-12 || hi > 0.2+1e-12 || lo > -0.075 || hi < -0.075 {
		t.Fatalf("interval %v does not hold the mean within the differences' range", got.Difference.CI)
	}
	if got.Total != 4 || got.Regressions != 1 || got.Improvements != 1 || got.NewSafetyFlags != 1 || got.Paired.Wins != 2 || got.Paired.Losses != 1 || got.Paired.Ties != 1 {
		t.Fatalf("counts: %d items, %d regressed, %d improved, %d new flags, paired %+v", got.Total, got.Regressions, got.Improvements, got.NewSafetyFlags, got.Paired)
	}
	if first := got.Items[0]; first.SourceID != i1 || !first.Regression || *first.Difference > -0.6+1e-12 || first.A.Critique == "" || first.B.Scores["judge"].Value != 0.5 {
		t.Fatalf("first item %+v: want the regression of −0.6 with both critiques and scores", first)
	}
	if len(got.Splits) != 2 || got.Splits[1].Split != eval.RedTeam || math.Abs(*got.Splits[1].Difference.Mean-0.1) > 1e-12 ||
		math.Abs(*got.Splits[0].Difference.Mean-(-0.4/3)) > 1e-12 {
		t.Fatalf("splits %+v", got.Splits)
	}
	for filter, want := range map[string]uuid.UUID{eval.FilterRegressions: i1, eval.FilterImprovements: i2, eval.FilterNewSafetyFlags: redTeamItem} {
		var kept []uuid.UUID
		for _, it := range got.Items {
			if it.Keep(filter) {
				kept = append(kept, it.SourceID)
			}
		}
		if len(kept) != 1 || kept[0] != want {
			t.Errorf("filter %s keeps %v, want %v", filter, kept, want)
		}
	}
	// Named golden set on which B has no run: refused by field.
	other := uuid.New()
	_, err = f.svc.PairVersions(ctx, f.org, va.ID, vb.ID, &other)
	var inv *errs.Invalid
	if !errors.As(err, &inv) || inv.ByField()["a"] == "" || inv.ByField()["b"] == "" {
		t.Fatalf("a golden set neither was evaluated on: %v", err)
	}
	// Another organisation sees nothing.
	if _, err := f.svc.PairVersions(ctx, uuid.New(), va.ID, vb.ID, &f.version); !errors.As(err, &inv) {
		t.Fatalf("another organisation: %v", err)
	}
}
