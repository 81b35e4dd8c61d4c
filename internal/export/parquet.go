package export

import (
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// ParquetMessage is one element of a parquet message list.
type ParquetMessage struct {
	Role    string `parquet:"role,dict"`
	Content string `parquet:"content"`
}

// ParquetSFTRow is a row of an SFT parquet file.
type ParquetSFTRow struct {
	Messages []ParquetMessage `parquet:"messages,list"`
}

// ParquetSFTRubricRow is a row of an SFT parquet file that carries the
// examples' settled rubric answers, a JSON object by rubric name and
// question key ("" when an example has none).
type ParquetSFTRubricRow struct {
	Messages      []ParquetMessage `parquet:"messages,list"`
	RubricAnswers string           `parquet:"rubric_answers"`
}

// ParquetPrefRow is a row of a preference parquet file.
type ParquetPrefRow struct {
	Prompt   []ParquetMessage `parquet:"prompt,list"`
	Chosen   []ParquetMessage `parquet:"chosen,list"`
	Rejected []ParquetMessage `parquet:"rejected,list"`
}

// Row groups are flushed after this many rows or this many bytes of text,
// whichever comes first: the writer holds one row group in memory, so these
// bound its memory however long the export is.
const (
	parquetGroupRows  = 20_000
	parquetGroupBytes = 32 << 20
)

// newParquetWriter returns a writer of parquet files that hold TRL's
// conversational formats as columns, which Hugging Face datasets and pandas
// read directly:
//
//   - SFT files: one column "messages", a list of {role, content}; the system
//     prompt, when set, is the first message.
//   - Preference files: "prompt" (list of {role, content}, system first when
//     set), "chosen" and "rejected" (each a list of one assistant message).
//
// A file holds one kind: kind (KindSFT or KindPreference, from NewWriter)
// fixes it up front, or "" lets the first row decide, and an empty file with no kind given gets
// the SFT schema. A preference pair written to an SFT file becomes its
// chosen conversation; an SFT example cannot go into a preference file.
//
// With opts.RubricAnswers an SFT file has a second column, rubric_answers
// (ParquetSFTRubricRow).
//
// Row groups are flushed every 20,000 rows or 32 MiB of text, so memory
// stays bounded; the file is Snappy-compressed.
func newParquetWriter(w io.Writer, kind Kind, opts Options) Writer {
	return &parquetWriter{out: w, kind: kind, rubricAnswers: opts.RubricAnswers}
}

type parquetWriter struct {
	out  io.Writer
	kind Kind
	sft  *parquet.GenericWriter[ParquetSFTRow]
	sftR *parquet.GenericWriter[ParquetSFTRubricRow]
	// rubricAnswers writes SFT rows with the rubric_answers column.
	rubricAnswers bool
	pref          *parquet.GenericWriter[ParquetPrefRow]
	closed        bool

	groupRows  int
	groupBytes int
	sftRow     [1]ParquetSFTRow
	sftRRow    [1]ParquetSFTRubricRow
	prefRow    [1]ParquetPrefRow
}

func writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.Compression(&parquet.Snappy),
		parquet.MaxRowsPerRowGroup(parquetGroupRows),
	}
}

// open creates the underlying writer for kind k on first use.
func (w *parquetWriter) open(k Kind) {
	if w.sft != nil || w.sftR != nil || w.pref != nil {
		return
	}
	if w.kind == "" {
		w.kind = k
	}
	switch {
	case w.kind == KindPreference:
		w.pref = parquet.NewGenericWriter[ParquetPrefRow](w.out, writerOptions()...)
	case w.rubricAnswers:
		w.sftR = parquet.NewGenericWriter[ParquetSFTRubricRow](w.out, writerOptions()...)
	default:
		w.sft = parquet.NewGenericWriter[ParquetSFTRow](w.out, writerOptions()...)
	}
}

func (w *parquetWriter) WriteSFT(ex SFTExample) error {
	if w.closed {
		return ErrClosed
	}
	if err := Parquet.CheckSFT(ex); err != nil {
		return err
	}
	w.open(KindSFT)
	if w.sftR != nil {
		row := &w.sftRRow[0]
		row.Messages = appendParquetMessages(row.Messages[:0], ex.System, ex.Messages)
		row.RubricAnswers = ex.RubricAnswers
		if _, err := w.sftR.Write(w.sftRRow[:]); err != nil {
			return err
		}
		return w.afterRow(textBytes(ex.System, ex.Messages) + len(ex.RubricAnswers))
	}
	if w.sft == nil {
		return fmt.Errorf("parquet file holds preference pairs; cannot add an SFT example")
	}
	row := &w.sftRow[0]
	row.Messages = appendParquetMessages(row.Messages[:0], ex.System, ex.Messages)
	if _, err := w.sft.Write(w.sftRow[:]); err != nil {
		return err
	}
	return w.afterRow(textBytes(ex.System, ex.Messages))
}

func (w *parquetWriter) WritePref(p PrefExample) error {
	if w.closed {
		return ErrClosed
	}
	if err := Parquet.CheckPref(p); err != nil {
		return err
	}
	w.open(KindPreference)
	if w.sft != nil || w.sftR != nil {
		return w.WriteSFT(p.SFT())
	}
	row := &w.prefRow[0]
	row.Prompt = appendParquetMessages(row.Prompt[:0], p.System, p.Prompt)
	row.Chosen = append(row.Chosen[:0], ParquetMessage{Role: RoleAssistant, Content: p.Chosen})
	row.Rejected = append(row.Rejected[:0], ParquetMessage{Role: RoleAssistant, Content: p.Rejected})
	if _, err := w.pref.Write(w.prefRow[:]); err != nil {
		return err
	}
	return w.afterRow(textBytes(p.System, p.Prompt) + len(p.Chosen) + len(p.Rejected))
}

// afterRow ends the row group once it holds enough text.
func (w *parquetWriter) afterRow(n int) error {
	w.groupRows++
	w.groupBytes += n
	if w.groupRows < parquetGroupRows && w.groupBytes < parquetGroupBytes {
		return nil
	}
	w.groupRows, w.groupBytes = 0, 0
	if w.sftR != nil {
		return w.sftR.Flush()
	}
	if w.sft != nil {
		return w.sft.Flush()
	}
	return w.pref.Flush()
}

func (w *parquetWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.open(KindSFT)
	if w.sftR != nil {
		return w.sftR.Close()
	}
	if w.sft != nil {
		return w.sft.Close()
	}
	return w.pref.Close()
}

func appendParquetMessages(dst []ParquetMessage, system string, msgs []Message) []ParquetMessage {
	if system != "" {
		dst = append(dst, ParquetMessage{Role: RoleSystem, Content: system})
	}
	for _, m := range msgs {
		dst = append(dst, ParquetMessage(m))
	}
	return dst
}

func textBytes(system string, msgs []Message) int {
	n := len(system)
	for _, m := range msgs {
		n += len(m.Content)
	}
	return n
}
