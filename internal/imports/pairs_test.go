package imports_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/importfile"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/publicdata"
)

func (e *env) pairIDs(t *testing.T) []uuid.UUID {
	t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT id FROM preference_pairs WHERE org_id = $1`, e.orgID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// sameIDs reports whether a and b hold the same ids, each once.
func sameIDs(a, b []uuid.UUID) bool {
	byText := func(x, y uuid.UUID) int { return strings.Compare(x.String(), y.String()) }
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, byText)
	slices.SortFunc(b, byText)
	return slices.Equal(a, b)
}

// The HH-RLHF fixture, plain and gzip: a single-turn and a multi-turn pair
// stored; an empty chosen reply and identical texts skipped, on the run too.
func TestImportHHRLHFFixture(t *testing.T) {
	for _, name := range []string{"hh_rlhf.jsonl", "hh_rlhf.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			run, sum, err := e.importPath(t, imports.KindHHRLHF, fixture(name))
			if err != nil {
				t.Fatal(err)
			}
			wantSkips := []importfile.Skip{{Line: 3, Reason: "empty chosen reply"}, {Line: 4, Reason: "chosen and rejected are identical"}}
			if sum.Stored != 2 || sum.Duplicates != 0 || sum.Skipped != 2 || !slices.Equal(sum.Skips, wantSkips) {
				t.Fatalf("summary %+v, want 2 stored and skips %v", sum, wantSkips)
			}
			var reasons map[string]int
			if err := json.Unmarshal(run.SkipReasons, &reasons); err != nil {
				t.Fatal(err)
			}
			if run.Kind != imports.KindHHRLHF || run.Status != imports.StatusSucceeded || run.Stored != 2 || run.Skipped != 2 ||
				reasons["empty chosen reply"] != 1 || reasons["chosen and rejected are identical"] != 1 {
				t.Fatalf("run: kind %s, status %s, stored %d, skipped %d, reasons %v", run.Kind, run.Status, run.Stored, run.Skipped, reasons)
			}
			var prompt []pairs.Message
			var query, chosen, method string
			if err := e.pool.QueryRow(e.ctx, `SELECT prompt, query, chosen_response, method FROM preference_pairs
				WHERE rejected_response = 'Buy some knives.'`).Scan(&prompt, &query, &chosen, &method); err != nil {
				t.Fatal(err)
			}
			if len(prompt) != 3 || prompt[1].Role != "assistant" || query != "And after that?" ||
				chosen != "Add a second ball: throw it when the first one peaks." || method != "import" {
				t.Errorf("multi-turn pair: prompt %+v, query %q, chosen %q, method %s", prompt, query, chosen, method)
			}
			if !sameIDs(sum.PairIDs, e.pairIDs(t)) {
				t.Errorf("summary names %v, stored are %v", sum.PairIDs, e.pairIDs(t))
			}

			_, again, err := e.importPath(t, imports.KindHHRLHF, fixture(name))
			if err != nil || again.Stored != 0 || again.Duplicates != 2 || !sameIDs(again.PairIDs, sum.PairIDs) {
				t.Fatalf("second import %+v (%v)", again, err)
			}
		})
	}
}

// The public HH-RLHF sample: 1,156 lines, of which lines 87, 517, 926 and
// 1104 have an empty chosen reply (the data's README).
func TestImportHHRLHFPublicData(t *testing.T) {
	path := publicdata.Path(t, "hh-rlhf", "harmless-base-test.part1.jsonl.gz")
	e := newEnv(t)
	run, sum, err := e.importPath(t, imports.KindHHRLHF, path)
	if err != nil {
		t.Fatal(err)
	}
	empty := map[int]bool{}
	for _, sk := range sum.Skips {
		if sk.Reason == "empty chosen reply" {
			empty[sk.Line] = true
		}
	}
	for _, line := range []int{87, 517, 926, 1104} {
		if !empty[line] {
			t.Errorf("line %d not reported as an empty chosen reply (%v)", line, sum.Skips)
		}
	}
	if sum.Stored+sum.Duplicates+sum.Skipped != 1156 || sum.Stored == 0 || int(run.Stored) != sum.Stored {
		t.Fatalf("summary %+v, run stored %d", sum, run.Stored)
	}
	if n := len(e.pairIDs(t)); n != sum.Stored {
		t.Fatalf("%d pairs stored, summary says %d", n, sum.Stored)
	}
	// Every prompt ends with the user's turn, and the query is that turn.
	if n := e.count(t, `SELECT count(*) FROM preference_pairs WHERE prompt->-1->>'role' <> 'user' OR prompt->-1->>'content' <> query OR method <> 'import'`); n != 0 {
		t.Fatalf("%d pairs with a bad prompt", n)
	}
	// Both imports name the stored pairs, each once: the first because it
	// stored them, the second because it found them.
	_, again, err := e.importPath(t, imports.KindHHRLHF, path)
	if err != nil || again.Stored != 0 || again.Duplicates != sum.Stored {
		t.Fatalf("second import %+v (%v)", again, err)
	}
	stored := e.pairIDs(t)
	if !sameIDs(sum.PairIDs, stored) || !sameIDs(again.PairIDs, stored) {
		t.Fatalf("imports name %d and %d pairs, %d are stored", len(sum.PairIDs), len(again.PairIDs), len(stored))
	}
}

// The OASST fixture's two ranked groups give four pairs, linked to the
// replies' feedback items when those were imported first.
func TestImportOASSTPairsFixture(t *testing.T) {
	e := newEnv(t)
	if _, _, err := e.importPath(t, imports.KindOASST, fixture("oasst_trees.jsonl")); err != nil {
		t.Fatal(err)
	}
	run, sum, err := e.importPath(t, imports.KindOASSTPairs, fixture("oasst_trees.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// The deleted reply is skipped with its line.
	if sum.Stored != 4 || sum.Skipped != 1 || sum.Skips[0] != (importfile.Skip{Line: 2, Reason: "message n-3: deleted (with its replies)"}) ||
		run.Kind != imports.KindOASSTPairs || run.Stored != 4 {
		t.Fatalf("summary %+v, run kind %s stored %d", sum, run.Kind, run.Stored)
	}
	if n := e.count(t, `SELECT count(*) FROM preference_pairs p JOIN feedback c ON c.id = p.chosen_feedback_id
		JOIN feedback r ON r.id = p.rejected_feedback_id WHERE p.external_id = 'oasst:' || substr(c.external_id, 7) || ':' || substr(r.external_id, 7)`); n != 4 {
		t.Fatalf("%d of 4 pairs linked to their replies' feedback", n)
	}
	var strength float32
	if err := e.pool.QueryRow(e.ctx, `SELECT preference_strength FROM preference_pairs WHERE external_id = 'oasst:m-2:m-4'`).Scan(&strength); err != nil || strength != 0.5 {
		t.Fatalf("m-2 over m-4: strength %v (%v), want 0.5", strength, err)
	}
}

// The public OpenAssistant sample: 212 ranked groups expand to 754 pairs.
func TestImportOASSTPairsPublicData(t *testing.T) {
	path := publicdata.Path(t, "oasst", "en_100_tree.jsonl")
	e := newEnv(t)
	_, sum, err := e.importPath(t, imports.KindOASSTPairs, path)
	if err != nil {
		t.Fatal(err)
	}
	pairSkips := 0
	for _, s := range sum.Skips {
		if strings.HasSuffix(s.Reason, "reply") || strings.HasPrefix(s.Reason, "chosen and rejected") {
			pairSkips++
		}
	}
	if sum.Stored+sum.Duplicates+pairSkips != 754 {
		t.Fatalf("summary: %+v", sum)
	}
}

// The TRL fixture: conversational with a system message, standard strings,
// multi-turn; replies equal but for case are skipped.
func TestImportTRLFixture(t *testing.T) {
	e := newEnv(t)
	_, sum, err := e.importPath(t, imports.KindTRL, fixture("trl_preference.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := []importfile.Skip{{Line: 4, Reason: "chosen and rejected replies are the same text"}}
	if sum.Stored != 3 || !slices.Equal(sum.Skips, want) || sum.Reasons[want[0].Reason] != 1 {
		t.Fatalf("summary %+v", sum)
	}
	if n := e.count(t, `SELECT count(*) FROM preference_pairs WHERE system_prompt = 'Answer in one sentence.' AND query = 'Why is the sea salty?'`); n != 1 {
		t.Error("line 1: system prompt or query not stored")
	}
	if n := e.count(t, `SELECT count(*) FROM preference_pairs WHERE jsonb_array_length(prompt) = 3 AND query = 'What is 7 times 8?'`); n != 1 {
		t.Error("line 3: multi-turn prompt not stored")
	}
}

func TestImportOpenAIPreferenceFixture(t *testing.T) {
	e := newEnv(t)
	_, sum, err := e.importPath(t, imports.KindOpenAIPreference, fixture("openai_preference.jsonl"))
	if err != nil || sum.Stored != 2 || sum.Skipped != 0 {
		t.Fatalf("summary %+v (%v)", sum, err)
	}
	if n := e.count(t, `SELECT count(*) FROM preference_pairs WHERE system_prompt = 'You are a terse assistant.' AND chosen_response = '100 °C.'`); n != 1 {
		t.Error("line 1 not stored as written")
	}
}

// Pairs written in Curate's TRL and OpenAI preference formats come back
// as they were.
func TestImportRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		kind   string
		format export.Format
	}{{imports.KindTRL, export.TRLPreference}, {imports.KindOpenAIPreference, export.OpenAIPreference}} {
		t.Run(tc.kind, func(t *testing.T) {
			e := newEnv(t)
			in := []export.PrefExample{
				{System: "Be brief.", Prompt: []export.Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello"}, {Role: "user", Content: "Price?"}},
					Chosen: "€10 a month.", Rejected: "Expensive."},
				{Prompt: []export.Message{{Role: "user", Content: "Colour of the sky?"}}, Chosen: "Blue, by Rayleigh scattering.", Rejected: "Green."},
			}
			var buf bytes.Buffer
			w, err := export.NewWriter(tc.format, &buf, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, ex := range in {
				if err := w.WritePref(ex); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			_, sum, err := e.importPath(t, tc.kind, writeFile(t, buf.String()))
			if err != nil || sum.Stored != 2 {
				t.Fatalf("import %+v (%v)", sum, err)
			}
			ps := pairs.New(e.pool)
			for _, id := range sum.PairIDs {
				d, err := ps.Get(context.Background(), e.orgID, id)
				if err != nil {
					t.Fatal(err)
				}
				got := pairs.Example(d.PreferencePair)
				want := in[0]
				if got.Chosen != want.Chosen {
					want = in[1]
				}
				if got.System != want.System || got.Chosen != want.Chosen || got.Rejected != want.Rejected || !slices.Equal(got.Prompt, want.Prompt) {
					t.Errorf("round trip: got %+v, want %+v", got, want)
				}
			}
		})
	}
}

func TestImportPairsBadInput(t *testing.T) {
	good := `{"prompt":[{"role":"user","content":"q"}],"chosen":[{"role":"assistant","content":"a"}],"rejected":[{"role":"assistant","content":"b"}]}` + "\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(strings.Repeat(good, 50)))
	_ = zw.Close()
	lfs := "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 12345\n"
	for _, tc := range []struct {
		name, kind, input string
		want              string
		is                error
	}{
		{"not JSON", imports.KindHHRLHF, `{"chosen":"\n\nHuman: a\n\nAssistant: b","rejected":"\n\nHuman: a\n\nAssistant: c"}` + "\nnot json\n", "line 2", importfile.ErrInvalidJSON},
		{"LFS pointer", imports.KindTRL, lfs, "git lfs pull", importfile.ErrLFSPointer},
		{"LFS pointer hh", imports.KindHHRLHF, lfs, "git lfs pull", importfile.ErrLFSPointer},
		{"truncated gzip", imports.KindTRL, gz.String()[:gz.Len()/2], "gzip", importfile.ErrGzip},
		{"blank", imports.KindTRL, "\n\n", "no JSON lines", importfile.ErrEmpty},
		{"no ranked replies", imports.KindOASSTPairs, `{"prompt":{"message_id":"p","text":"Q","role":"prompter","replies":[{"message_id":"a","text":"A","role":"assistant"}]}}` + "\n", "no oasst-pairs pairs", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			run, _, err := e.importPath(t, tc.kind, writeFile(t, tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !imports.IsBadInput(err) {
				t.Fatalf("error %v, want a bad-input error mentioning %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("error %v is not %v", err, tc.is)
			}
			if run.Status != imports.StatusFailed || !strings.Contains(run.Error, tc.want) {
				t.Fatalf("run %s: %q", run.Status, run.Error)
			}
			if n := len(e.pairIDs(t)); n != 0 {
				t.Fatalf("%d pairs stored from a refused file", n)
			}
		})
	}
	// Identical and empty replies are skipped and reported, the rest stored.
	e := newEnv(t)
	mixed := good + `{"prompt":"q2","chosen":"same","rejected":"same"}` + "\n" + `{"prompt":"q3","chosen":"","rejected":"b"}` + "\n"
	_, sum, err := e.importPath(t, imports.KindTRL, writeFile(t, mixed))
	want := []importfile.Skip{{Line: 2, Reason: "chosen and rejected replies are the same text"}, {Line: 3, Reason: "empty chosen reply"}}
	if err != nil || sum.Stored != 1 || !slices.Equal(sum.Skips, want) {
		t.Fatalf("mixed file: %+v (%v)", sum, err)
	}
}

// BenchmarkHHRLHFImport imports the public HH-RLHF sample (1,156 lines)
// into an empty organisation per iteration, checking then storing as every
// import does, and reports lines per second.
func BenchmarkHHRLHFImport(b *testing.B) {
	path := publicdata.Path(b, "hh-rlhf", "harmless-base-test.part1.jsonl.gz")
	e := newEnv(b)
	var lines int
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		if _, err := e.pool.Exec(e.ctx, `DELETE FROM preference_pairs`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		_, sum, err := e.importPath(b, imports.KindHHRLHF, path)
		if err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		lines += sum.Stored + sum.Duplicates + sum.Skipped
	}
	b.ReportMetric(float64(lines)/elapsed.Seconds(), "rows/s")
}
