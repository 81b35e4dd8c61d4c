package export

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Writer streams examples into one file of a format. A Writer is not safe
// for concurrent use. Close flushes buffered output (and, for parquet, writes
// the footer); it does not close the underlying io.Writer.
type Writer interface {
	// WriteSFT writes one SFT example; preference-only formats reject it.
	WriteSFT(SFTExample) error
	// WritePref writes one preference pair; formats without a rejected
	// reply write the prompt with the chosen reply (PrefExample.SFT).
	WritePref(PrefExample) error
	Close() error
}

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("export: writer is closed")

// NewWriter returns a streaming writer of format f onto w: every format,
// JSON Lines and parquet alike, is written through this one constructor
// and the Writer interface. kind is what the file holds (KindSFT or
// KindPreference), or "" to let the first example decide; a format that
// cannot hold kind is refused. Parquet needs the kind up front to give an
// empty file the right columns; the JSON Lines formats write each line the
// same whatever the kind.
func NewWriter(f Format, w io.Writer, kind Kind) (Writer, error) {
	return NewWriterWith(f, w, kind, Options{})
}

// Options are what a writer adds to a format's usual shape.
type Options struct {
	// RubricAnswers adds a rubric_answers column (a JSON object, empty
	// when an example has none) to an SFT Parquet file. Other formats'
	// shapes are fixed and leave the answers out.
	RubricAnswers bool
}

// NewWriterWith is NewWriter with options.
func NewWriterWith(f Format, w io.Writer, kind Kind, opts Options) (Writer, error) {
	if kind != "" && !f.Accepts(kind) {
		return nil, fmt.Errorf("export: %s cannot hold %s examples", f, kind)
	}
	switch f {
	case Parquet:
		return newParquetWriter(w, kind, opts), nil
	case OpenAIChat, OpenAIPreference, TRLPreference, BedrockChat, AnthropicText, ShareGPT, Alpaca:
		bw := bufio.NewWriterSize(w, 64<<10)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		return &jsonlWriter{format: f, bw: bw, enc: enc}, nil
	}
	return nil, fmt.Errorf("export: unknown format %q", f)
}

// Line shapes, one struct per format so encoding/json writes the keys in
// declaration order.
type (
	openAIChatLine struct {
		Messages []Message `json:"messages"`
	}
	openAIPrefLine struct {
		Input struct {
			Messages []Message `json:"messages"`
		} `json:"input"`
		PreferredOutput    []Message `json:"preferred_output"`
		NonPreferredOutput []Message `json:"non_preferred_output"`
	}
	trlPrefLine struct {
		Prompt   []Message `json:"prompt"`
		Chosen   []Message `json:"chosen"`
		Rejected []Message `json:"rejected"`
	}
	bedrockLine struct {
		System   string    `json:"system,omitempty"`
		Messages []Message `json:"messages"`
	}
	anthropicTextLine struct {
		Input  string `json:"input"`
		Output string `json:"output"`
	}
	shareGPTTurn struct {
		From  string `json:"from"`
		Value string `json:"value"`
	}
	shareGPTLine struct {
		Conversations []shareGPTTurn `json:"conversations"`
	}
	alpacaLine struct {
		Instruction string      `json:"instruction"`
		Input       string      `json:"input"`
		Output      string      `json:"output"`
		System      string      `json:"system,omitempty"`
		History     [][2]string `json:"history,omitempty"`
	}
)

type jsonlWriter struct {
	format Format
	bw     *bufio.Writer
	enc    *json.Encoder
	closed bool

	// Scratch space reused across lines so a long export does not allocate
	// per line.
	openAIPref openAIPrefLine
	trlPref    trlPrefLine
	msgs       []Message
	chosen     [1]Message
	rejected   [1]Message
	turns      []shareGPTTurn
	history    [][2]string
}

func (w *jsonlWriter) WriteSFT(ex SFTExample) error {
	if w.closed {
		return ErrClosed
	}
	if err := w.format.CheckSFT(ex); err != nil {
		return err
	}
	return w.enc.Encode(w.sftLine(ex))
}

func (w *jsonlWriter) WritePref(p PrefExample) error {
	if w.closed {
		return ErrClosed
	}
	if err := w.format.CheckPref(p); err != nil {
		return err
	}
	switch w.format {
	case OpenAIPreference:
		line := &w.openAIPref
		line.Input.Messages = w.withSystem(p.System, p.Prompt)
		line.PreferredOutput = w.reply(&w.chosen, p.Chosen)
		line.NonPreferredOutput = w.reply(&w.rejected, p.Rejected)
		return w.enc.Encode(line)
	case TRLPreference:
		line := &w.trlPref
		line.Prompt = w.withSystem(p.System, p.Prompt)
		line.Chosen = w.reply(&w.chosen, p.Chosen)
		line.Rejected = w.reply(&w.rejected, p.Rejected)
		return w.enc.Encode(line)
	}
	return w.enc.Encode(w.sftLine(p.SFT()))
}

func (w *jsonlWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	return w.bw.Flush()
}

// withSystem returns msgs with the system prompt, when set, as a leading
// system message.
func (w *jsonlWriter) withSystem(system string, msgs []Message) []Message {
	w.msgs = w.msgs[:0]
	if system != "" {
		w.msgs = append(w.msgs, Message{Role: RoleSystem, Content: system})
	}
	w.msgs = append(w.msgs, msgs...)
	return w.msgs
}

func (w *jsonlWriter) reply(buf *[1]Message, content string) []Message {
	buf[0] = Message{Role: RoleAssistant, Content: content}
	return buf[:]
}

// sftLine builds the line value for an example that CheckSFT accepted.
func (w *jsonlWriter) sftLine(ex SFTExample) any {
	last := len(ex.Messages) - 1
	switch w.format {
	case OpenAIChat:
		return &openAIChatLine{Messages: w.withSystem(ex.System, ex.Messages)}
	case BedrockChat:
		return &bedrockLine{System: ex.System, Messages: ex.Messages}
	case AnthropicText:
		return &anthropicTextLine{Input: anthropicPrompt(ex), Output: ex.Messages[last].Content}
	case ShareGPT:
		w.turns = w.turns[:0]
		if ex.System != "" {
			w.turns = append(w.turns, shareGPTTurn{From: "system", Value: ex.System})
		}
		for _, m := range ex.Messages {
			w.turns = append(w.turns, shareGPTTurn{From: shareGPTFrom[m.Role], Value: m.Content})
		}
		return &shareGPTLine{Conversations: w.turns}
	case Alpaca:
		w.history = w.history[:0]
		for i := 0; i+1 < last-1; i += 2 {
			w.history = append(w.history, [2]string{ex.Messages[i].Content, ex.Messages[i+1].Content})
		}
		return &alpacaLine{
			Instruction: ex.Messages[last-1].Content,
			Output:      ex.Messages[last].Content,
			System:      ex.System,
			History:     w.history,
		}
	}
	panic("export: sftLine called for " + string(w.format))
}

var shareGPTFrom = map[string]string{RoleSystem: "system", RoleUser: "human", RoleAssistant: "gpt"}

// anthropicPrompt renders the conversation before the final reply in the
// Human/Assistant text convention, ending with the "Assistant:" cue. A system
// prompt goes first, as its own paragraph.
func anthropicPrompt(ex SFTExample) string {
	var b strings.Builder
	if ex.System != "" {
		b.WriteString(ex.System)
		b.WriteString("\n\n")
	}
	for _, m := range ex.Messages[:len(ex.Messages)-1] {
		if m.Role == RoleUser {
			b.WriteString("Human: ")
		} else {
			b.WriteString("Assistant: ")
		}
		b.WriteString(m.Content)
		b.WriteString("\n\n")
	}
	b.WriteString("Assistant:")
	return b.String()
}
