package export

import (
	"bytes"
	"io"
	"reflect"
	"testing"
	"time"
)

func TestHashingWriter(t *testing.T) {
	var out bytes.Buffer
	hw := NewHashingWriter(&out)
	for _, part := range []string{"a", "bc"} {
		if _, err := io.WriteString(hw, part); err != nil {
			t.Fatal(err)
		}
	}
	// SHA-256("abc") from FIPS 180-2, appendix B.1.
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if hw.SHA256() != want || hw.Bytes() != 3 || out.String() != "abc" {
		t.Errorf("got sha %s, %d bytes, passed %q; want %s, 3, \"abc\"", hw.SHA256(), hw.Bytes(), out.String(), want)
	}
	got := hw.File("train.jsonl", "train", 1)
	if got != (ManifestFile{Name: "train.jsonl", Split: "train", Rows: 1, Bytes: 3, SHA256: want}) {
		t.Errorf("File = %+v", got)
	}
}

func TestManifestEncoding(t *testing.T) {
	m := Manifest{
		Format:         TRLPreference,
		DatasetVersion: "sha256:0f1e",
		SplitSeed:      42,
		Counts:         map[string]int{"train": 9, "eval": 1},
		Files: []ManifestFile{
			{Name: "train.jsonl", Split: "train", Rows: 9, Bytes: 900, SHA256: "aa"},
			{Name: "eval.jsonl", Split: "eval", Rows: 1, Bytes: 100, SHA256: "bb"},
		},
		CreatedAt: time.Date(2025, 3, 1, 13, 30, 0, 0, time.FixedZone("CET", 3600)),
	}
	// Keys in declaration order, counts and files sorted by name, time in UTC.
	want := `{
  "format": "trl_preference",
  "dataset_version": "sha256:0f1e",
  "split_seed": 42,
  "counts": {
    "eval": 1,
    "train": 9
  },
  "files": [
    {
      "name": "eval.jsonl",
      "split": "eval",
      "rows": 1,
      "bytes": 100,
      "sha256": "bb"
    },
    {
      "name": "train.jsonl",
      "split": "train",
      "rows": 9,
      "bytes": 900,
      "sha256": "aa"
    }
  ],
  "created_at": "2025-03-01T12:30:00Z"
}
`
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.String() != want {
		t.Errorf("manifest:\n%s\nwant:\n%s", buf.String(), want)
	}
	if m.Files[0].Name != "train.jsonl" {
		t.Error("Encode reordered the caller's slice")
	}
	back, err := ReadManifest(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if back.Format != m.Format || back.SplitSeed != 42 || !back.CreatedAt.Equal(m.CreatedAt) ||
		!reflect.DeepEqual(back.Counts, m.Counts) || len(back.Files) != 2 || back.Files[0].Name != "eval.jsonl" {
		t.Errorf("read back %+v", back)
	}
}
