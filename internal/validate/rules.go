package validate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/tokens"
)

// conversationRoles are the roles a format can place inside a conversation.
// Formats with a single system slot take the system prompt separately.
func conversationRoles(f export.Format) []string {
	switch f {
	case export.OpenAIChat, export.ShareGPT, export.Parquet:
		return []string{export.RoleSystem, export.RoleUser, export.RoleAssistant}
	}
	return []string{export.RoleUser, export.RoleAssistant}
}

var promptRoles = []string{export.RoleSystem, export.RoleUser, export.RoleAssistant}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// sftFacts applies the SFT rules to one example.
func (v *Validator) sftFacts(ex export.SFTExample) Facts {
	var fa Facts
	f := v.opts.Format
	msgs := ex.Messages
	roles := conversationRoles(f)
	hasUser := false
	for j, m := range msgs {
		if !slices.Contains(roles, m.Role) {
			fa.add(Error, CodeInvalidRole, fmt.Sprintf("messages[%d].role: %q is not allowed in %s (want %s)", j, m.Role, f, strings.Join(roles, ", ")))
		}
		if m.Role == export.RoleUser {
			hasUser = true
		}
		if j < len(msgs)-1 && blank(m.Content) {
			fa.add(Error, CodeEmptyContent, fmt.Sprintf("messages[%d].content: empty", j))
		}
	}
	switch last := len(msgs) - 1; {
	case last < 0:
		fa.add(Error, CodeLastNotAssistant, "messages: empty; the example needs an assistant reply")
	case msgs[last].Role != export.RoleAssistant:
		fa.add(Error, CodeLastNotAssistant, fmt.Sprintf("messages[%d]: the last message is from %q, not the assistant", last, msgs[last].Role))
	case blank(msgs[last].Content):
		fa.add(Error, CodeEmptyResponse, fmt.Sprintf("messages[%d].content: the assistant reply is empty", last))
	}
	if f == export.BedrockChat {
		checkBedrock(&fa, msgs)
	} else if !hasUser && len(msgs) > 0 {
		fa.add(Warning, CodeNoUserMessage, "no user message: the reply answers nothing")
	}
	if !fa.hasError() {
		if err := f.CheckSFT(ex); err != nil {
			fa.add(Error, CodeUnwritable, err.Error())
		}
	}

	fa.Tokens, fa.Assistant = v.counter.Conversation(tokenMessages(ex.System, msgs))
	fa.Sequences = []int{fa.Tokens}
	v.textFacts(&fa, conversationText(ex.System, msgs))
	return fa
}

// checkBedrock applies Bedrock's conversation rules: user first, then
// strictly alternating turns (the last-is-assistant rule is shared).
func checkBedrock(fa *Facts, msgs []export.Message) {
	if len(msgs) > 0 && msgs[0].Role != export.RoleUser {
		fa.add(Error, CodeFirstNotUser, fmt.Sprintf("messages[0]: the first message is from %q; Bedrock needs the user's first", msgs[0].Role))
	}
	for j := 1; j < len(msgs); j++ {
		if msgs[j].Role == msgs[j-1].Role {
			fa.add(Error, CodeRolesNotAlternating, fmt.Sprintf("messages[%d]: two %q messages in a row; Bedrock needs user and assistant to alternate", j, msgs[j].Role))
			return
		}
	}
}

// prefFacts applies the preference rules to one pair.
func (v *Validator) prefFacts(p export.PrefExample) Facts {
	var fa Facts
	f := v.opts.Format
	users, assistants := 0, 0
	for j, m := range p.Prompt {
		if !slices.Contains(promptRoles, m.Role) {
			fa.add(Error, CodeInvalidRole, fmt.Sprintf("prompt[%d].role: %q is not one of %s", j, m.Role, strings.Join(promptRoles, ", ")))
		}
		switch m.Role {
		case export.RoleUser:
			users++
		case export.RoleAssistant:
			assistants++
		}
		if blank(m.Content) {
			fa.add(Error, CodeEmptyContent, fmt.Sprintf("prompt[%d].content: empty", j))
		}
	}
	last := len(p.Prompt) - 1
	switch {
	case f == export.OpenAIPreference && (users != 1 || assistants != 0 || last < 0 || p.Prompt[last].Role != export.RoleUser):
		fa.add(Error, CodeNotOneTurn, fmt.Sprintf("prompt has %d user and %d assistant messages; OpenAI preference fine-tuning takes exactly one user message (after an optional system prompt)", users, assistants))
	case last < 0:
		fa.add(Error, CodePromptNotUserLast, "prompt: empty")
	case p.Prompt[last].Role != export.RoleUser:
		fa.add(Error, CodePromptNotUserLast, fmt.Sprintf("prompt[%d]: the prompt ends with a %q message; the replies must answer the user", last, p.Prompt[last].Role))
	}
	if blank(p.Chosen) {
		fa.add(Error, CodeEmptyResponse, "chosen: empty reply")
	}
	if blank(p.Rejected) {
		fa.add(Error, CodeEmptyResponse, "rejected: empty reply")
	}
	if !blank(p.Chosen) && strings.TrimSpace(p.Chosen) == strings.TrimSpace(p.Rejected) {
		fa.add(Error, CodeChosenEqualsRejected, fmt.Sprintf("chosen and rejected are the same text (%q): nothing to prefer", describe(p.Chosen)))
	}
	if !fa.hasError() {
		if err := f.CheckPref(p); err != nil {
			fa.add(Error, CodeUnwritable, err.Error())
		}
	}

	// Each sequence is the prompt plus one reply; the prompt is counted once.
	prompt, _ := v.counter.Conversation(tokenMessages(p.System, p.Prompt))
	chosenMsg, chosenTokens := v.counter.Conversation([]tokens.Message{{Role: export.RoleAssistant, Content: p.Chosen}})
	rejectedMsg, rejectedTokens := v.counter.Conversation([]tokens.Message{{Role: export.RoleAssistant, Content: p.Rejected}})
	chosen := prompt + chosenMsg - tokens.ReplyPriming
	rejected := prompt + rejectedMsg - tokens.ReplyPriming
	fa.Tokens = chosen + rejected
	fa.Assistant = chosenTokens + rejectedTokens
	fa.Sequences = []int{chosen, rejected}

	v.textFacts(&fa, conversationText(p.System, p.Prompt)+"\nchosen: "+p.Chosen+"\nrejected: "+p.Rejected)
	return fa
}

// textFacts adds what the checks on an example's whole text need: the
// duplicate keys, and the PII it holds when a detector is set.
func (v *Validator) textFacts(fa *Facts, text string) {
	fa.HasText = true
	fa.TextKey, fa.Signature = textKeys(text)
	if v.opts.PIIDetector == nil {
		return
	}
	kinds := slices.Clone(v.opts.PIIDetector(text))
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	if len(kinds) > 0 {
		fa.add(Warning, CodePII, "possible personal data: "+strings.Join(kinds, ", "))
	}
}

// checkContext reports a sequence longer than the training context.
func (v *Validator) checkContext(i, n int) {
	if v.contextLimit > 0 && n > v.contextLimit {
		v.add(Error, CodeOverContext, i, fmt.Sprintf("%d tokens; %s trains on at most %d per example, so the rest would be cut off", n, v.modelName(), v.contextLimit))
	}
}

func (v *Validator) modelName() string {
	if v.opts.BaseModel == "" {
		return "the base model"
	}
	return v.opts.BaseModel
}

// capped is the billable part of an n-token sequence: what exceeds the
// context is truncated and not trained on.
func (v *Validator) capped(n int) int {
	if v.contextLimit > 0 {
		return min(n, v.contextLimit)
	}
	return n
}

// checkDuplicates compares example i's text with the earlier examples'.
func (v *Validator) checkDuplicates(i int, fa *Facts) {
	if j, ok := v.dups.exact(i, fa.TextKey); ok {
		v.add(Warning, CodeDuplicate, i, fmt.Sprintf("same text as example %d", j))
	} else if j, sim, ok := v.dups.near(i, fa.Signature); ok {
		v.add(Warning, CodeNearDuplicate, i, fmt.Sprintf("about %.0f%% similar to example %d", sim*100, j))
	}
}

func tokenMessages(system string, msgs []export.Message) []tokens.Message {
	out := make([]tokens.Message, 0, len(msgs)+2)
	if system != "" {
		out = append(out, tokens.Message{Role: export.RoleSystem, Content: system})
	}
	for _, m := range msgs {
		out = append(out, tokens.Message{Role: m.Role, Content: m.Content})
	}
	return out
}

// conversationText renders an example as "role: content" lines, the text
// the duplicate and PII checks look at.
func conversationText(system string, msgs []export.Message) string {
	var b strings.Builder
	if system != "" {
		b.WriteString("system: ")
		b.WriteString(system)
	}
	for _, m := range msgs {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(m.Content)
	}
	return b.String()
}
