package export

import (
	"fmt"
)

// Roles a message may have.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// SFTExample is a supervised fine-tuning example: an optional system prompt
// and a conversation whose last message is the assistant reply to learn.
type SFTExample struct {
	System   string
	Messages []Message
	// RubricAnswers is the example's settled rubric answers as a JSON
	// object, "" when it has none. Only formats with room for it (a
	// Parquet file written WithRubricAnswers) carry it; the provider line
	// shapes leave it out.
	RubricAnswers string
}

// PrefExample is a preference pair: a prompt conversation (usually ending
// with the user's message) and two assistant replies, the chosen one
// preferred over the rejected one.
type PrefExample struct {
	System   string
	Prompt   []Message
	Chosen   string
	Rejected string
}

// SFT returns the example as supervised data: the prompt followed by the
// chosen reply. This is what SFT-only formats write for a preference example.
func (p PrefExample) SFT() SFTExample {
	msgs := make([]Message, 0, len(p.Prompt)+1)
	msgs = append(msgs, p.Prompt...)
	msgs = append(msgs, Message{Role: RoleAssistant, Content: p.Chosen})
	return SFTExample{System: p.System, Messages: msgs}
}

// CheckSFT reports whether the format can represent ex, with an error naming
// the offending field. It checks only what the line shape needs; the wider
// rules of each provider belong to package validate, which calls this too,
// so an example that passes validation always writes.
func (f Format) CheckSFT(ex SFTExample) error {
	if !f.Accepts(KindSFT) {
		return fmt.Errorf("%s holds preference pairs, not SFT examples", f)
	}
	if len(ex.Messages) == 0 {
		return fmt.Errorf("messages: empty")
	}
	for i, m := range ex.Messages {
		switch m.Role {
		case RoleUser, RoleAssistant:
		case RoleSystem:
			// Formats with a single system slot cannot place one mid-conversation.
			if f == BedrockChat || f == AnthropicText || f == Alpaca {
				return fmt.Errorf("messages[%d].role: %s has no place for a system message inside the conversation; put it in the system prompt", i, f)
			}
		default:
			return fmt.Errorf("messages[%d].role: unknown role %q (want system, user or assistant)", i, m.Role)
		}
	}
	last := len(ex.Messages) - 1
	if ex.Messages[last].Role != RoleAssistant {
		return fmt.Errorf("messages[%d].role: the last message must be from the assistant, got %q", last, ex.Messages[last].Role)
	}
	if f == Alpaca {
		return checkAlpaca(ex.Messages)
	}
	return nil
}

// checkAlpaca requires earlier turns to come as user/assistant pairs (they
// become "history") followed by the final user instruction and reply.
func checkAlpaca(msgs []Message) error {
	n := len(msgs)
	if n < 2 || msgs[n-2].Role != RoleUser {
		return fmt.Errorf("messages[%d]: alpaca needs a user message right before the final reply", max(n-2, 0))
	}
	for i := 0; i < n-2; i++ {
		want := RoleUser
		if i%2 == 1 {
			want = RoleAssistant
		}
		if msgs[i].Role != want {
			return fmt.Errorf("messages[%d].role: alpaca history needs alternating user/assistant turns, got %q where %q belongs", i, msgs[i].Role, want)
		}
	}
	if (n-2)%2 != 0 {
		return fmt.Errorf("messages[%d]: alpaca history needs an assistant reply after this user turn", n-3)
	}
	return nil
}

// CheckPref reports whether the format can represent p. Formats without a
// rejected reply check the chosen conversation (p.SFT()).
func (f Format) CheckPref(p PrefExample) error {
	if !f.Accepts(KindPreference) {
		return fmt.Errorf("%s cannot hold preference pairs", f)
	}
	if !f.KeepsRejected() {
		return f.CheckSFT(p.SFT())
	}
	if len(p.Prompt) == 0 {
		return fmt.Errorf("prompt: empty")
	}
	for i, m := range p.Prompt {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant:
		default:
			return fmt.Errorf("prompt[%d].role: unknown role %q (want system, user or assistant)", i, m.Role)
		}
	}
	return nil
}

// LastUser is the content of a conversation's last user message, "" when
// it has none: the question a prompt asks.
func LastUser(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			return msgs[i].Content
		}
	}
	return ""
}
