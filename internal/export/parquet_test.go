package export

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func pm(role, content string) ParquetMessage { return ParquetMessage{Role: role, Content: content} }

func TestParquetPreferenceReadsBack(t *testing.T) {
	_, pref := sampleExamples()
	var buf bytes.Buffer
	w, err := NewWriter(Parquet, &buf, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pref {
		if err := w.WritePref(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteSFT(SFTExample{Messages: []Message{user("q"), assistant("a")}}); err == nil {
		t.Error("an SFT example went into a preference parquet file")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rows, err := parquet.Read[ParquetPrefRow](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	want := []ParquetPrefRow{
		{
			Prompt:   []ParquetMessage{pm("system", "You are terse."), pm("user", "What color is the sky?")},
			Chosen:   []ParquetMessage{pm("assistant", "Blue.")},
			Rejected: []ParquetMessage{pm("assistant", "Green.")},
		},
		{
			Prompt:   []ParquetMessage{pm("user", "Hi"), pm("assistant", "Hello!"), pm("user", "Tell me a joke <3")},
			Chosen:   []ParquetMessage{pm("assistant", "Why did the chicken…")},
			Rejected: []ParquetMessage{pm("assistant", "")},
		},
		{
			Prompt:   []ParquetMessage{pm("user", "line\nbreak\ttab \"quote\"")},
			Chosen:   []ParquetMessage{pm("assistant", "ok\n")},
			Rejected: []ParquetMessage{pm("assistant", " ")},
		},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("rows read back:\n%+v\nwant\n%+v", rows, want)
	}
	// The column names are TRL's.
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, field := range f.Schema().Fields() {
		cols = append(cols, field.Name())
	}
	if !reflect.DeepEqual(cols, []string{"prompt", "chosen", "rejected"}) {
		t.Errorf("columns = %v, want [prompt chosen rejected]", cols)
	}
}

func TestParquetSFTReadsBack(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(Parquet, &buf, KindSFT)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSFT(SFTExample{System: "S", Messages: []Message{user("q"), assistant("a")}}); err != nil {
		t.Fatal(err)
	}
	// A preference pair in an SFT file is written as its chosen conversation.
	if err := w.WritePref(PrefExample{Prompt: []Message{user("q2")}, Chosen: "yes", Rejected: "no"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rows, err := parquet.Read[ParquetSFTRow](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	want := []ParquetSFTRow{
		{Messages: []ParquetMessage{pm("system", "S"), pm("user", "q"), pm("assistant", "a")}},
		{Messages: []ParquetMessage{pm("user", "q2"), pm("assistant", "yes")}},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("rows = %+v, want %+v", rows, want)
	}
}

func TestParquetEmptyFile(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(Parquet, &buf, KindPreference)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if f.NumRows() != 0 || len(f.Schema().Fields()) != 3 {
		t.Errorf("empty preference file: %d rows, %d columns; want 0 rows, 3 columns", f.NumRows(), len(f.Schema().Fields()))
	}
}

// Writing more rows than fit in one row group must flush groups as it goes
// (that is what keeps memory flat) and keep every row intact even though the
// writer reuses its row buffers.
func TestParquetFlushesRowGroups(t *testing.T) {
	const n = 2*parquetGroupRows + 5
	var buf bytes.Buffer
	w, err := NewWriter(Parquet, &buf, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p := PrefExample{Prompt: []Message{user(fmt.Sprintf("q%d", i))}, Chosen: fmt.Sprintf("c%d", i), Rejected: fmt.Sprintf("r%d", i)}
		if err := w.WritePref(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(f.RowGroups()); got != 3 {
		t.Errorf("row groups = %d, want 3 for %d rows at %d per group", got, n, parquetGroupRows)
	}
	rows, err := parquet.Read[ParquetPrefRow](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n {
		t.Fatalf("read %d rows, want %d", len(rows), n)
	}
	for _, i := range []int{0, parquetGroupRows - 1, parquetGroupRows, n - 1} {
		r := rows[i]
		if r.Prompt[0].Content != fmt.Sprintf("q%d", i) || r.Chosen[0].Content != fmt.Sprintf("c%d", i) || r.Rejected[0].Content != fmt.Sprintf("r%d", i) {
			t.Errorf("row %d = %+v", i, r)
		}
	}
}
