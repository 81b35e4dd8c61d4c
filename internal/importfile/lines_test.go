package importfile

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

type feedbackLine struct {
	Query    string `json:"query"`
	Response string `json:"response"`
	Rating   int    `json:"rating"`
}

func readAll(t *testing.T, input []byte) ([]int, []feedbackLine, error) {
	t.Helper()
	var lines []int
	var items []feedbackLine
	err := ReadJSONL(context.Background(), bytes.NewReader(input), func(line int, v feedbackLine) error {
		lines = append(lines, line)
		items = append(items, v)
		return nil
	})
	return lines, items, err
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadJSONL(t *testing.T) {
	input := "\uFEFF" + `{"query":"q1","response":"r1","rating":5}` + "\n" +
		"\n" + // blank lines are skipped but counted
		"   \r\n" +
		`{"query":"q2","response":"r2"}` + "\r\n" +
		`{"query":"q3","response":"r3","rating":1}` // valid JSON without a final newline
	for name, data := range map[string][]byte{"plain": []byte(input), "gzip": gzipped(t, []byte(input))} {
		t.Run(name, func(t *testing.T) {
			lines, items, err := readAll(t, data)
			if err != nil {
				t.Fatal(err)
			}
			want := []feedbackLine{{"q1", "r1", 5}, {"q2", "r2", 0}, {"q3", "r3", 1}}
			if len(items) != 3 || items[0] != want[0] || items[1] != want[1] || items[2] != want[2] {
				t.Fatalf("items = %+v, want %+v", items, want)
			}
			if lines[0] != 1 || lines[1] != 4 || lines[2] != 5 {
				t.Fatalf("line numbers = %v, want [1 4 5]", lines)
			}
		})
	}
}

func TestReadJSONLErrors(t *testing.T) {
	ok := `{"query":"q","response":"r"}` + "\n"
	tests := []struct {
		name     string
		input    []byte
		line     int // 0: not a line error
		is       error
		contains string
	}{
		{"unknown field", []byte(ok + `{"query":"q","respnse":"r"}` + "\n"), 2, nil, `"respnse"`},
		{"wrong type", []byte(ok + ok + `{"query":"q","rating":"five"}` + "\n"), 3, nil, `"rating"`},
		{"syntax error", []byte(`{"query":"q",}` + "\n" + ok), 1, ErrInvalidJSON, "column"},
		{"not an object", []byte(`[1,2]` + "\n"), 1, nil, "array"},
		{"two values", []byte(`{"query":"a"} {"query":"b"}` + "\n"), 1, ErrInvalidJSON, "more than one"},
		{"truncated last line", []byte(ok + ok + `{"query":"q","resp`), 3, ErrTruncated, ""},
		{"bad JSON on a last line that has its newline", []byte(ok + `{"query":"q","resp` + "\n"), 2, ErrInvalidJSON, ""},
		{"invalid UTF-8", []byte(ok + "{\"query\":\"caf\xe9\"}\n"), 2, ErrEncoding, "column 14"},
		{"line too long", []byte(ok + `{"query":"` + strings.Repeat("x", MaxLineBytes) + `"}` + "\n"), 2, ErrLineTooLong, ""},
		{"empty input", []byte("\n\n"), 0, ErrEmpty, ""},
		{"gzip header only", []byte{0x1f, 0x8b, 8}, 0, ErrGzip, ""},
		{"gzip cut short", cutShort(gzipped(t, numberedLines(5000))), 0, ErrGzip, "ends early"},
		{
			"LFS pointer",
			[]byte("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"),
			0, ErrLFSPointer, "sha256:4d7a2146",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readAll(t, tt.input)
			if err == nil {
				t.Fatal("no error")
			}
			var le *LineError
			if tt.line != 0 && (!errors.As(err, &le) || le.Line != tt.line) {
				t.Fatalf("err = %v, want a LineError for line %d", err, tt.line)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want it to wrap %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.contains)
			}
		})
	}
}

func numberedLines(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"query":"question %d","response":"answer %d"}`+"\n", i, i*7919%10007)
	}
	return b.Bytes()
}

func cutShort(b []byte) []byte { return b[:len(b)/2] }

// A line of exactly MaxLineBytes is accepted.
func TestReadJSONLLongestLine(t *testing.T) {
	prefix, suffix := `{"query":"`, `"}`
	line := prefix + strings.Repeat("x", MaxLineBytes-len(prefix)-len(suffix)) + suffix
	_, items, err := readAll(t, []byte(line+"\n"))
	if err != nil || len(items) != 1 || len(items[0].Query) != MaxLineBytes-len(prefix)-len(suffix) {
		t.Fatalf("err = %v, items = %d", err, len(items))
	}
}

func TestReadJSONLCallbackErrorNamesLine(t *testing.T) {
	input := strings.Repeat(`{"query":"q","rating":3}`+"\n", 3) + `{"query":"q","rating":9}` + "\n"
	errRange := errors.New("rating must be 1 to 5")
	err := ReadJSONL(context.Background(), strings.NewReader(input), func(line int, v feedbackLine) error {
		if v.Rating > 5 {
			return errRange
		}
		return nil
	})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 4 || !errors.Is(err, errRange) {
		t.Fatalf("err = %v, want line 4 wrapping the callback's error", err)
	}
	if err.Error() != "line 4: rating must be 1 to 5" {
		t.Fatalf("message %q", err)
	}
}

func TestReadJSONLStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	input := strings.Repeat(`{"query":"q"}`+"\n", 100)
	n := 0
	err := ReadJSONL(ctx, strings.NewReader(input), func(line int, v feedbackLine) error {
		n++
		if n == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 10 {
		t.Fatalf("err = %v after %d lines, want context.Canceled after 10", err, n)
	}
}

func TestWithProgress(t *testing.T) {
	plain := numberedLines(100000)
	for name, data := range map[string][]byte{"plain": plain, "gzip": gzipped(t, plain)} {
		t.Run(name, func(t *testing.T) {
			if len(data) < 2*readBlock {
				t.Fatalf("input of %d bytes is too small to show progress", len(data))
			}
			var calls int
			var last, total int64
			r := WithProgress(bytes.NewReader(data), int64(len(data)), func(read, tot int64) {
				if read < last {
					t.Fatalf("progress went back from %d to %d", last, read)
				}
				calls++
				last, total = read, tot
			})
			err := ReadJSONL(context.Background(), r, func(int, feedbackLine) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if last != int64(len(data)) || total != int64(len(data)) {
				t.Fatalf("last progress %d of %d, want %d of %d", last, total, len(data), len(data))
			}
			if calls < 2 {
				t.Fatalf("%d progress calls for %d bytes, want several", calls, len(data))
			}
		})
	}
}
