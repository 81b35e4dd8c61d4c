// Package pairs stores preference pairs (for a prompt, a chosen reply
// preferred over a rejected one) and makes them: by hand in the editor, from
// a corrected feedback item, from a curator's ranking of several answers to
// one query, by set-based generation over the organisation's feedback, and
// from imported files (HH-RLHF, OASST, Curate's own TRL and OpenAI
// preference exports).
//
// Every pair has a content hash over its prompt and replies; a pair whose
// hash is already stored in the organisation is never stored again.
package pairs

import (
	"crypto/sha256"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/feedback"
)

// Limits on one pair, the same as on the feedback it comes from.
const (
	MaxQuery    = feedback.MaxQuery
	MaxResponse = feedback.MaxResponse
	MaxNotes    = feedback.MaxComment
	MaxContext  = feedback.MaxContext // bytes of the context documents JSON
	MaxMessages = 200                 // turns in a prompt
)

// Methods are how pairs are made, as the API and the database name them.
var Methods = []string{"manual", "correction", "same_query", "threshold", "multi_aspect", "ranking", "import"}

// Message is one turn of a prompt conversation.
type Message = export.Message

// Input is a pair as the editor and the API take it.
type Input struct {
	// Prompt is the conversation before the compared replies, ending with
	// the user turn they answer. Optional: without it the prompt is Query
	// alone as one user message.
	Prompt             []Message       `json:"prompt,omitempty"`
	Query              string          `json:"query"`
	SystemPrompt       string          `json:"system_prompt,omitempty"`
	Chosen             string          `json:"chosen_response"`
	Rejected           string          `json:"rejected_response"`
	Strength           *float64        `json:"preference_strength,omitempty"` // 0 to 1; default 1
	ContextDocuments   json.RawMessage `json:"context_documents,omitempty"`   // a JSON array
	Notes              string          `json:"annotation_notes,omitempty"`
	Tags               []string        `json:"tags,omitempty"`
	Method             string          `json:"method,omitempty"` // manual (default) or correction
	ChosenFeedbackID   *uuid.UUID      `json:"chosen_feedback_id,omitempty"`
	RejectedFeedbackID *uuid.UUID      `json:"rejected_feedback_id,omitempty"`
	// AnnotatorID is the user of the organisation who judged the pair;
	// nil is the user storing it (none for an API key).
	AnnotatorID *uuid.UUID `json:"annotator_id,omitempty"`
}

// Validate checks the input, recording a message per bad field under
// prefix, and settles the defaults: the prompt from the query (or the query
// from the prompt), strength 1, an empty document list, normalised tags.
func (in *Input) Validate(v *errs.Invalid, prefix string) {
	field := func(name string) string { return prefix + name }
	text := func(name, value string, max int, required bool) bool {
		return v.Text(field(name), value, max, required)
	}
	promptOK := true
	if len(in.Prompt) > 0 {
		promptOK = in.validatePrompt(v, prefix)
	}
	queryOK := promptOK && text("query", in.Query, MaxQuery, true)
	if queryOK && len(in.Prompt) == 0 {
		in.Prompt = []Message{{Role: export.RoleUser, Content: in.Query}}
	}
	text("system_prompt", in.SystemPrompt, MaxQuery, false)
	chosenOK := text("chosen_response", in.Chosen, MaxResponse, true)
	rejectedOK := text("rejected_response", in.Rejected, MaxResponse, true)
	if chosenOK && rejectedOK && Normalize(in.Chosen) == Normalize(in.Rejected) {
		v.Add(field("rejected_response"), "is the same text as the chosen response: a pair needs two different replies")
	}
	if in.Strength == nil {
		one := 1.0
		in.Strength = &one
	} else if s := *in.Strength; math.IsNaN(s) || s < 0 || s > 1 {
		v.Add(field("preference_strength"), "must be from 0 to 1, not %v", s)
	}
	if len(in.ContextDocuments) == 0 || string(in.ContextDocuments) == "null" {
		in.ContextDocuments = json.RawMessage("[]")
	} else if len(in.ContextDocuments) > MaxContext {
		v.Add(field("context_documents"), "is %d bytes; at most %d", len(in.ContextDocuments), MaxContext)
	} else {
		var docs []json.RawMessage
		if err := json.Unmarshal(in.ContextDocuments, &docs); err != nil {
			v.Add(field("context_documents"), "must be a JSON array of documents")
		}
	}
	text("annotation_notes", in.Notes, MaxNotes, false)
	tags, msg := feedback.NormalizeTags(in.Tags)
	if msg != "" {
		v.Add(field("tags"), "%s", msg)
	}
	in.Tags = tags
	switch in.Method {
	case "":
		in.Method = "manual"
	case "manual", "correction":
	default:
		v.Add(field("method"), "must be manual or correction (other methods have their own endpoints)")
	}
}

// validatePrompt checks a given conversation and ties it to the query: its
// last turn is the user's, and the query is that turn's text. It reports
// whether the prompt itself is usable.
func (in *Input) validatePrompt(v *errs.Invalid, prefix string) bool {
	if len(in.Prompt) > MaxMessages {
		v.Add(prefix+"prompt", "has %d messages; at most %d", len(in.Prompt), MaxMessages)
		return false
	}
	total := 0
	for i, m := range in.Prompt {
		f := prefix + "prompt[" + strconv.Itoa(i) + "]"
		switch {
		case m.Role != export.RoleUser && m.Role != export.RoleAssistant:
			v.Add(f+".role", "must be user or assistant (put a system prompt in system_prompt)")
		case strings.TrimSpace(m.Content) == "":
			v.Add(f+".content", "is required")
		case !utf8.ValidString(m.Content) || strings.ContainsRune(m.Content, 0):
			v.Add(f+".content", "is not valid UTF-8 text")
		}
		total += len(m.Content)
	}
	if total > MaxContext {
		v.Add(prefix+"prompt", "is %d bytes; at most %d", total, MaxContext)
	}
	last := in.Prompt[len(in.Prompt)-1]
	if last.Role != export.RoleUser {
		v.Add(prefix+"prompt", "must end with the user's turn that the replies answer")
		return false
	}
	if in.Query == "" {
		in.Query = last.Content
	} else if in.Query != last.Content {
		v.Add(prefix+"query", "must be the prompt's last user message")
	}
	return true
}

// ContentHash identifies a pair within an organisation: sha256 over the
// system prompt, each prompt turn's role and text, the chosen and the
// rejected reply, each written as "<byte length>:<text>" so that no two
// different pairs write the same bytes. The migration's pair_candidates
// computes the same for generated pairs; keep the two in step.
func ContentHash(system string, prompt []Message, chosen, rejected string) []byte {
	h := sha256.New()
	write := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	write(system)
	for _, m := range prompt {
		write(m.Role)
		write(m.Content)
	}
	write(chosen)
	write(rejected)
	return h.Sum(nil)
}

// Normalize lowercases s and collapses its white space, the way "the same
// query" is judged.
func Normalize(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), unicode.IsSpace), " ")
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}
