// Package export writes training examples in the file formats that
// fine-tuning services and trainers read, streaming one example at a time so
// memory stays flat however many rows a dataset has.
//
// Every JSON Lines format writes one object per line with a fixed key order,
// no HTML escaping and "\n" line ends, so the same examples always give the
// same bytes. The parquet format writes TRL's conversational columns.
package export

import (
	"fmt"
	"strings"
)

// Format names an export file format.
type Format string

// The supported formats. Each line shape is documented on the format's
// writer; DESIGN.md §5 "Export formats" lists them too.
const (
	// OpenAIChat is OpenAI's chat fine-tuning (SFT) format:
	// {"messages":[{"role":"system",...},{"role":"user",...},{"role":"assistant",...}]}
	OpenAIChat Format = "openai_chat"
	// OpenAIPreference is OpenAI's DPO format:
	// {"input":{"messages":[...]},"preferred_output":[...],"non_preferred_output":[...]}
	OpenAIPreference Format = "openai_preference"
	// TRLPreference is TRL's conversational preference format:
	// {"prompt":[...],"chosen":[{"role":"assistant",...}],"rejected":[...]}
	TRLPreference Format = "trl_preference"
	// BedrockChat is Amazon Bedrock's format for fine-tuning Claude:
	// {"system":"...","messages":[{"role":"user",...},{"role":"assistant",...}]}
	BedrockChat Format = "bedrock_chat"
	// AnthropicText is the prompt/completion text format:
	// {"input":"Human: ...\n\nAssistant:","output":"..."}
	AnthropicText Format = "anthropic_text"
	// ShareGPT is {"conversations":[{"from":"system"|"human"|"gpt","value":...}]}.
	ShareGPT Format = "sharegpt"
	// Alpaca is {"instruction":...,"input":"","output":...,"system":...,"history":[[q,a],...]}.
	Alpaca Format = "alpaca"
	// Parquet holds TRL's conversational columns; see newParquetWriter.
	Parquet Format = "parquet"
)

// Formats lists every format, in the order a user would be offered them.
func Formats() []Format {
	return []Format{OpenAIChat, OpenAIPreference, TRLPreference, BedrockChat, AnthropicText, ShareGPT, Alpaca, Parquet}
}

// ParseFormat returns the format named by s (case and surrounding space
// ignored), or an error listing the valid names.
func ParseFormat(s string) (Format, error) {
	want := Format(strings.ToLower(strings.TrimSpace(s)))
	for _, f := range Formats() {
		if f == want {
			return f, nil
		}
	}
	names := make([]string, 0, len(Formats()))
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return "", fmt.Errorf("unknown export format %q (want one of %s)", s, strings.Join(names, ", "))
}

// Aliases are the seed's export_format names (jsonl, openai, anthropic)
// for the formats they stand for, which depend on what the dataset holds:
// "jsonl" is the usual JSON Lines file for the kind (OpenAI's chat format
// for single examples, TRL's prompt/chosen/rejected for pairs, the seed's
// DPO format); "openai" is OpenAI's own format for the kind (chat, or
// DPO); "anthropic" is the seed's Anthropic format, anthropic_text, which
// holds single examples only: Claude trains on no preference pairs.
var Aliases = map[string]map[Kind]Format{
	"jsonl":     {KindSFT: OpenAIChat, KindPreference: TRLPreference},
	"openai":    {KindSFT: OpenAIChat, KindPreference: OpenAIPreference},
	"anthropic": {KindSFT: AnthropicText},
}

// ParseFormatFor is ParseFormat for a dataset of kind k, which also takes
// the seed's aliases (see Aliases).
func ParseFormatFor(s string, k Kind) (Format, error) {
	byKind, ok := Aliases[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return ParseFormat(s)
	}
	if f, ok := byKind[k]; ok {
		return f, nil
	}
	names := make([]string, 0, len(FormatsFor(k)))
	for _, f := range FormatsFor(k) {
		names = append(names, string(f))
	}
	return "", fmt.Errorf("%q names a format for single examples, and this dataset holds preference pairs (want one of %s)", s, strings.Join(names, ", "))
}

// FormatsFor lists the formats that fit a dataset of kind k, in the order
// of Formats: for preference pairs those that keep the rejected reply, for
// single examples those that hold one. A form offering these never offers a
// format that would drop half of every pair or has nothing to fill in.
func FormatsFor(k Kind) []Format {
	var out []Format
	for _, f := range Formats() {
		if (k == KindPreference && f.KeepsRejected()) || (k != KindPreference && f.Accepts(KindSFT)) {
			out = append(out, f)
		}
	}
	return out
}

// Kind is the kind of example a dataset holds.
type Kind string

// Example kinds.
const (
	KindSFT        Kind = "sft"
	KindPreference Kind = "preference"
)

// Accepts reports whether the format can hold examples of kind k. Every
// format that accepts SFT examples also takes preference examples, writing
// the prompt with the chosen reply (PrefExample.SFT); only preference
// formats and parquet keep the rejected reply.
func (f Format) Accepts(k Kind) bool {
	if k != KindSFT && k != KindPreference {
		return false
	}
	switch f {
	case OpenAIPreference, TRLPreference:
		return k == KindPreference
	case OpenAIChat, BedrockChat, AnthropicText, ShareGPT, Alpaca, Parquet:
		return true
	}
	return false
}

// KeepsRejected reports whether the format writes a preference example's
// rejected reply (true for the preference formats and parquet).
func (f Format) KeepsRejected() bool {
	return f == OpenAIPreference || f == TRLPreference || f == Parquet
}

// Ext is the file extension for the format, with its dot.
func (f Format) Ext() string {
	if f == Parquet {
		return ".parquet"
	}
	return ".jsonl"
}

// ContentType is the media type to serve a file of this format with.
func (f Format) ContentType() string {
	if f == Parquet {
		return "application/vnd.apache.parquet"
	}
	return "application/jsonl"
}
