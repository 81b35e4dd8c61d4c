package export

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// fixturePairs reads testdata/pairs.jsonl: four preference pairs written
// for these tests (a system prompt, a multi-turn prompt with HTML
// characters, non-ASCII text, new lines and tabs, a blank rejected reply).
func fixturePairs(t *testing.T) []PrefExample {
	t.Helper()
	f, err := os.Open("testdata/pairs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []PrefExample
	if err := ReadPref(context.Background(), TRLPreference, f, func(_ int, p PrefExample) error {
		out = append(out, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 || out[0].System == "" {
		t.Fatalf("fixture: %d pairs, first system %q; want 4 pairs, the first with a system prompt", len(out), out[0].System)
	}
	return out
}

// Every format, parquet included, is written through NewWriter and the
// Writer interface; the same examples give the same bytes on every run,
// and each file reads back as the examples written.
func TestEveryFormatThroughWriter(t *testing.T) {
	pairs := fixturePairs(t)
	write := func(f Format) []byte {
		var buf bytes.Buffer
		w, err := NewWriter(f, &buf, KindPreference)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range pairs {
			if err := w.WritePref(p); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return buf.Bytes()
	}
	for _, f := range Formats() {
		t.Run(string(f), func(t *testing.T) {
			first, second := write(f), write(f)
			if len(first) == 0 || !bytes.Equal(first, second) {
				t.Fatalf("two runs over the same examples gave %d and %d bytes, not the same bytes", len(first), len(second))
			}
			switch f {
			case Parquet:
				rows, err := parquet.Read[ParquetPrefRow](bytes.NewReader(first), int64(len(first)))
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) != len(pairs) {
					t.Fatalf("%d rows, want %d", len(rows), len(pairs))
				}
				for i, r := range rows {
					if r.Chosen[0].Content != pairs[i].Chosen || r.Rejected[0].Content != pairs[i].Rejected {
						t.Errorf("row %d = %+v, want chosen %q, rejected %q", i, r, pairs[i].Chosen, pairs[i].Rejected)
					}
				}
			case TRLPreference, OpenAIPreference:
				var got []PrefExample
				if err := ReadPref(context.Background(), f, bytes.NewReader(first), func(_ int, p PrefExample) error {
					got = append(got, p)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, pairs) {
					t.Errorf("read back %+v, want %+v", got, pairs)
				}
			case OpenAIChat, BedrockChat:
				var got []SFTExample
				if err := ReadSFT(context.Background(), f, bytes.NewReader(first), func(_ int, s SFTExample) error {
					got = append(got, s)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				var want []SFTExample
				for _, p := range pairs {
					want = append(want, p.SFT())
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("read back %+v, want the chosen conversations %+v", got, want)
				}
			default:
				lines := 0
				sc := bufio.NewScanner(bytes.NewReader(first))
				for sc.Scan() {
					lines++
				}
				if lines != len(pairs) {
					t.Errorf("%d lines, want %d", lines, len(pairs))
				}
			}
		})
	}
}

// A file declares what it holds; a format that cannot hold it is refused
// before anything is written.
func TestNewWriterRefusesKind(t *testing.T) {
	for _, f := range []Format{TRLPreference, OpenAIPreference} {
		var buf bytes.Buffer
		if _, err := NewWriter(f, &buf, KindSFT); err == nil || buf.Len() != 0 {
			t.Errorf("%s took an SFT file (%v, %d bytes)", f, err, buf.Len())
		}
	}
	if _, err := NewWriter(Parquet, &bytes.Buffer{}, KindSFT); err != nil {
		t.Errorf("parquet refused an SFT file: %v", err)
	}
}
