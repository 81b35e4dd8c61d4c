package datasets_test

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/importfile"
	"github.com/curate/curate/internal/publicdata"
)

// hhPairs stores the distinct pairs of the public HH-RLHF sample, read
// from path.
func (e env) hhPairs(t *testing.T, path string) []uuid.UUID {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	_, err = importfile.ReadHHRLHF(context.Background(), gz, func(p importfile.Pair) error {
		prompt, err := json.Marshal(p.Prompt)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(append(prompt, "\x00"+p.Chosen+"\x00"+p.Rejected...))
		var id uuid.UUID
		err = e.pool.QueryRow(context.Background(), `INSERT INTO preference_pairs (org_id, prompt, query, chosen_response, rejected_response, method, content_hash)
			VALUES ($1, $2, $3, $4, $5, 'import', $6) ON CONFLICT DO NOTHING RETURNING id`,
			e.org, prompt, p.Prompt[len(p.Prompt)-1].Content, p.Chosen, p.Rejected, sum[:]).Scan(&id)
		if err == nil {
			ids = append(ids, id)
		}
		return nil // a repeated pair is stored once
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A report over a frozen version adds each item's stored facts; on real
// data it equals the report computed item by item from scratch, whether
// the facts are computed by this report or read back by the next, read
// in many ranges, in
// formats that keep the pair, keep only the chosen reply, or refuse
// multi-turn prompts, with PII masked or reported.
func TestReportFromFactsEqualsScratchOnPublicData(t *testing.T) {
	ctx := context.Background()
	sample := publicdata.Path(t, "hh-rlhf", "harmless-base-test.part1.jsonl.gz") // before the database: a skip leaves nothing behind
	e := newEnv(t)
	ids := e.hhPairs(t, sample)
	d := e.dataset(t, datasets.TypeDPO, datasets.Settings{ValidationPercent: 10, SplitSeed: 4, BaseModel: "gpt-4o-mini-2024-07-18"})
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, ids); err != nil {
		t.Fatal(err)
	}
	ver, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Ranges of 100 items, so each split is read and stored in many.
	datasets.SetFactsRange(t, 100)
	cases := []struct {
		format export.Format
		mask   bool
	}{{export.TRLPreference, true}, {export.OpenAIPreference, false}, {export.OpenAIChat, true}}
	findings := 0
	for _, c := range cases {
		scratch, err := datasets.ReportFromScratch(ctx, e.pool, ver, c.format, d.BaseModel, c.mask)
		if err != nil {
			t.Fatal(err)
		}
		if scratch.Examples != len(ids) {
			t.Fatalf("%s: %d examples, %d pairs", c.format, scratch.Examples, len(ids))
		}
		findings += len(scratch.Findings)
		for _, pass := range []string{"computing facts", "reading facts"} {
			got, err := datasets.ReportFromFacts(ctx, e.pool, ver, c.format, d.BaseModel, c.mask)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, scratch) {
				t.Errorf("%s, mask %v, %s: the report differs from the one computed from scratch:\n%+v\nwant\n%+v", c.format, c.mask, pass, got, scratch)
			}
		}
	}
	if findings < 3 {
		t.Fatalf("only %d kinds of findings: the comparison says little", findings)
	}
	// Each profile holds one row per distinct content.
	want := count(t, e.pool, `SELECT count(DISTINCT content_sha) FROM dataset_version_items WHERE version_id = $1`, ver.ID)
	if got := count(t, e.pool, `SELECT count(*) FROM item_facts`); got != want*len(cases) {
		t.Fatalf("%d facts stored; want %d per profile, %d profiles", got, want, len(cases))
	}
}

// A report on a draft checks only the members it has not seen: the facts
// of earlier members are read back, not computed again, and a freeze of
// the same content finds every item's facts ready.
func TestDraftReportIsIncremental(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ids := e.pairs(t, 40)
	d := e.dataset(t, datasets.TypeDPO, datasets.Settings{ValidationPercent: 25, SplitSeed: 2})
	report := func(wantExamples, wantFacts int) {
		t.Helper()
		rep, err := e.svc.Report(ctx, e.org, d.ID, datasets.ReportRequest{MaskPII: true})
		if err != nil || rep.Examples != wantExamples {
			t.Fatalf("report of %d examples: %+v %v", wantExamples, rep.Report, err)
		}
		if n := count(t, e.pool, `SELECT count(*) FROM item_facts`); n != wantFacts {
			t.Fatalf("%d facts stored, want %d", n, wantFacts)
		}
	}
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, ids[:25]); err != nil {
		t.Fatal(err)
	}
	report(25, 25)
	if _, err := e.pool.Exec(ctx, `UPDATE item_facts SET created_at = $1`, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, ids[25:]); err != nil {
		t.Fatal(err)
	}
	report(40, 40)
	if n := count(t, e.pool, `SELECT count(*) FROM item_facts WHERE created_at = $1`, time.Unix(0, 0)); n != 25 {
		t.Fatalf("%d of the first 25 members' facts kept; the rest were computed again", n)
	}
	ver, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := datasets.ReportFromFacts(ctx, e.pool, ver, export.TRLPreference, "", true); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.pool, `SELECT count(*) FROM item_facts`); n != 40 {
		t.Fatalf("%d facts after the frozen version's report; the freeze should have found all 40", n)
	}
}

// A version's items go with their version, and a freeze that reuses the
// latest version leaves none of its own behind.
func TestVersionItemsGoWithTheirVersion(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	d := e.dataset(t, datasets.TypeDPO, datasets.Settings{ValidationPercent: 25, SplitSeed: 2})
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, e.pairs(t, 8)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE training_datasets SET status = 'curating' WHERE id = $1`, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.pool, `SELECT count(*) FROM dataset_version_items`); n != 8 {
		t.Fatalf("%d items after freezing the same content twice, want 8", n)
	}
	if _, err := e.pool.Exec(ctx, `DELETE FROM training_datasets WHERE id = $1`, d.ID); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.pool, `SELECT count(*) FROM dataset_version_items`); n != 0 {
		t.Fatalf("%d items left after their dataset was deleted", n)
	}
}

// A report holds one connection at a time: four at once on a pool of one
// all finish, and store every fact.
func TestReportsOnAPoolOfOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := newEnv(t)
	d := e.dataset(t, datasets.TypeDPO, datasets.Settings{ValidationPercent: 25, SplitSeed: 2})
	// More items than a few batches, so the reports store while others
	// stream.
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, e.pairs(t, 1200)); err != nil {
		t.Fatal(err)
	}
	ver, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.pool.Config()
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	formats := []export.Format{export.TRLPreference, export.OpenAIPreference, export.OpenAIChat, export.ShareGPT}
	var g errgroup.Group
	for _, f := range formats {
		g.Go(func() error {
			rep, err := datasets.ReportFromFacts(ctx, one, ver, f, "", true)
			if err == nil && rep.Examples != 1200 {
				err = fmt.Errorf("%s: %d examples", f, rep.Examples)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.pool, `SELECT count(*) FROM item_facts`); n != 1200*len(formats) {
		t.Fatalf("%d facts stored, want %d", n, 1200*len(formats))
	}
}
