package importfile

import (
	"context"
	"encoding/json"
	"io"

	"github.com/curate/curate/internal/export"
)

// ReadTRLPreference reads TRL preference lines, {"prompt", "chosen",
// "rejected"}, conversational (lists of messages) or standard (plain
// strings), as Curate's trl_preference export writes them, and passes one
// Pair per line to fn. A leading system message becomes Pair.System.
func ReadTRLPreference(ctx context.Context, r io.Reader, fn func(Pair) error) (Report, error) {
	return readPref(ctx, export.TRLPreference, r, fn)
}

// ReadOpenAIPreference reads OpenAI DPO lines, {"input": {"messages"},
// "preferred_output", "non_preferred_output"}, as Curate's
// openai_preference export writes them, and passes one Pair per line to fn.
func ReadOpenAIPreference(ctx context.Context, r io.Reader, fn func(Pair) error) (Report, error) {
	return readPref(ctx, export.OpenAIPreference, r, fn)
}

// readPref reads the lines with this package's line reader (gzip, Git LFS
// pointers, encoding, length and cut-off lines handled as for every other
// format) and parses each as the export package defines the format, so
// what Curate writes it reads back. Fields the format does not have are
// refused. Whether a pair is usable (two different, non-empty replies) is
// the caller's judgement, as for HH-RLHF pairs that pass this reader.
func readPref(ctx context.Context, f export.Format, r io.Reader, fn func(Pair) error) (Report, error) {
	var rep Report
	err := eachLine(ctx, r, func(line int, data []byte, last bool) error {
		rep.Lines++
		// JSON errors first, worded (and a cut-off last line told) as for
		// every other format; then the format's own shape.
		if err := decodeLine(line, data, last, false, new(json.RawMessage)); err != nil {
			return err
		}
		ex, err := export.ParsePref(f, data)
		if err != nil {
			return &LineError{line, err}
		}
		p := Pair{System: ex.System, Prompt: make([]Message, len(ex.Prompt)), Chosen: ex.Chosen, Rejected: ex.Rejected, Strength: 1, Line: line}
		for i, m := range ex.Prompt {
			p.Prompt[i] = Message{Role: m.Role, Content: m.Content}
		}
		if err := fn(p); err != nil {
			return lineErr(line, err)
		}
		rep.Pairs++
		return nil
	})
	return rep, err
}
