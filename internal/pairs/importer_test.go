package pairs_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/pairs"
)

// dataPath is a file of the shared test data, beside the checkout.
func dataPath(t testing.TB, rel string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "data", rel)
}

func TestImportHHRLHF(t *testing.T) {
	t.Parallel()
	_, s, org := setup(t)
	ctx := context.Background()
	f, err := os.Open(dataPath(t, "hh-rlhf/harmless-base-test.part1.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := s.Import(ctx, curator, org, "hh-rlhf", f)
	if err != nil {
		t.Fatal(err)
	}
	// The data's README: 1,156 lines; lines 87, 517, 926 and 1104 have an
	// empty chosen reply.
	empty := map[int]bool{}
	for _, sk := range rep.Skipped {
		if sk.Reason == "empty chosen reply" {
			empty[sk.Line] = true
		}
	}
	for _, line := range []int{87, 517, 926, 1104} {
		if !empty[line] {
			t.Errorf("line %d not reported as an empty chosen reply (%v)", line, rep.Skipped)
		}
	}
	if rep.Read+len(rep.Skipped) != 1156 || rep.Created+rep.Duplicates != rep.Read || rep.Created == 0 {
		t.Fatalf("report %+v", rep)
	}
	if n := countPairs(t, s, org); n != rep.Created {
		t.Fatalf("%d pairs stored, report says %d", n, rep.Created)
	}
	// Every prompt ends with the user's turn, and the query is that turn.
	var bad int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM preference_pairs WHERE prompt->-1->>'role' <> 'user' OR prompt->-1->>'content' <> query OR method <> 'import'`).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("%d pairs with a bad prompt (%v)", bad, err)
	}
	// Importing again stores nothing new.
	f2, _ := os.Open(dataPath(t, "hh-rlhf/harmless-base-test.part1.jsonl.gz"))
	defer f2.Close()
	again, err := s.Import(ctx, curator, org, "hh-rlhf", f2)
	if err != nil || again.Created != 0 || again.Duplicates != rep.Read {
		t.Fatalf("second import %+v (%v)", again, err)
	}
	// Both imports name the stored pairs, each once: the first because it
	// stored them, the second because it found them.
	var stored []uuid.UUID
	rows, err := s.Pool.Query(ctx, `SELECT id FROM preference_pairs WHERE org_id = $1`, org)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	byText := func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) }
	slices.SortFunc(stored, byText)
	for name, r := range map[string]pairs.ImportReport{"first": rep, "second": again} {
		got := slices.Clone(r.PairIDs)
		slices.SortFunc(got, byText)
		if !slices.Equal(got, stored) {
			t.Fatalf("%s import names %d pairs, %d are stored", name, len(got), len(stored))
		}
	}
}

func TestImportOASST(t *testing.T) {
	t.Parallel()
	_, s, org := setup(t)
	f, err := os.Open(dataPath(t, "oasst/en_100_tree.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := s.Import(context.Background(), curator, org, "oasst-pairs", f)
	if err != nil {
		t.Fatal(err)
	}
	// The data's README: 212 ranked sibling groups expand to 754 pairs.
	if rep.Read+countSkippedPairs(rep) != 754 || rep.Created+rep.Duplicates != rep.Read {
		t.Fatalf("report: read %d, created %d, duplicates %d, skipped %v", rep.Read, rep.Created, rep.Duplicates, rep.Skipped)
	}
}

// countSkippedPairs counts skips of pairs (not of whole OASST messages).
func countSkippedPairs(rep pairs.ImportReport) int {
	n := 0
	for _, s := range rep.Skipped {
		if strings.HasSuffix(s.Reason, "reply") || strings.HasPrefix(s.Reason, "chosen and rejected") {
			n++
		}
	}
	return n
}

// Pairs written in Curate's TRL and OpenAI preference formats come back
// as they were.
func TestImportRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind   string
		format export.Format
	}{{"trl", export.TRLPreference}, {"openai-preference", export.OpenAIPreference}} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			_, s, org := setup(t)
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
			rep, err := s.Import(context.Background(), curator, org, tc.kind, bytes.NewReader(buf.Bytes()))
			if err != nil || rep.Created != 2 {
				t.Fatalf("import %+v (%v)", rep, err)
			}
			page, err := s.List(context.Background(), org, pairs.Filter{Method: "import"}, nil, 10)
			if err != nil || len(page.Rows) != 2 {
				t.Fatalf("list %d (%v)", len(page.Rows), err)
			}
			for _, r := range page.Rows {
				d, err := s.Get(context.Background(), org, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				got := pairs.Example(d.PreferencePair)
				want := in[0]
				if got.Chosen != want.Chosen {
					want = in[1]
				}
				if got.System != want.System || got.Chosen != want.Chosen || got.Rejected != want.Rejected || len(got.Prompt) != len(want.Prompt) ||
					got.Prompt[len(got.Prompt)-1] != want.Prompt[len(want.Prompt)-1] {
					t.Errorf("round trip: got %+v, want %+v", got, want)
				}
			}
		})
	}
}

func TestImportBadInput(t *testing.T) {
	t.Parallel()
	_, s, org := setup(t)
	ctx := context.Background()
	good := `{"prompt":[{"role":"user","content":"q"}],"chosen":[{"role":"assistant","content":"a"}],"rejected":[{"role":"assistant","content":"b"}]}` + "\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(strings.Repeat(good, 50)))
	_ = zw.Close()
	for _, tc := range []struct {
		name, kind, input string
		want              string
		is                error
	}{
		{"not the format", "trl", good + `{"messages":[]}` + "\n", "line 2", nil},
		{"not JSON", "hh-rlhf", `{"chosen":"\n\nHuman: a\n\nAssistant: b","rejected":"\n\nHuman: a\n\nAssistant: c"}` + "\nnot json\n", "line 2", imports.ErrInvalidJSON},
		{"LFS pointer", "trl", "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 12345\n", "git lfs pull", imports.ErrLFSPointer},
		{"LFS pointer hh", "hh-rlhf", "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 12345\n", "git lfs pull", imports.ErrLFSPointer},
		{"truncated gzip", "trl", gz.String()[:gz.Len()/2], "gzip", imports.ErrGzip},
		{"prompt ends with the assistant", "trl", `{"prompt":[{"role":"user","content":"q"},{"role":"assistant","content":"x"}],"chosen":"a","rejected":"b"}` + "\n", "line 1", nil},
		{"unknown kind", "csv", good, "kind", nil},
		{"empty", "trl", "\n\n", "no trl pairs", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Import(ctx, curator, org, tc.kind, strings.NewReader(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("error %v is not %v", err, tc.is)
			}
			if n := countPairs(t, s, org); n != 0 {
				t.Fatalf("%d pairs stored from a refused file", n)
			}
		})
	}
	// Identical and empty replies are skipped and reported, the rest stored.
	mixed := good + `{"prompt":"q2","chosen":"same","rejected":"same"}` + "\n" + `{"prompt":"q3","chosen":"","rejected":"b"}` + "\n"
	rep, err := s.Import(ctx, curator, org, "trl", strings.NewReader(mixed))
	if err != nil || rep.Created != 1 || len(rep.Skipped) != 2 || rep.Skipped[0].Line != 2 || rep.Skipped[1].Reason != "empty chosen reply" {
		t.Fatalf("mixed file: %+v (%v)", rep, err)
	}
}
