package tokens

import "strings"

// Model describes what the token counter needs to know about a base model.
type Model struct {
	// Encoding is the tokenizer used to count the model's tokens.
	Encoding string
	// TrainingContext is the most tokens one fine-tuning example may hold;
	// 0 means the limit is not known here and is not checked.
	TrainingContext int
}

// modelPrefixes maps base-model name prefixes to their encoding and
// fine-tuning context, most specific prefix first. Limits are the "training
// example context length" figures published for fine-tuning, which can be
// smaller than the model's inference window:
//   - gpt-4o, gpt-4o-mini, gpt-4.1 family: 65,536 training tokens (OpenAI and
//     Azure OpenAI fine-tuning model tables; inference window 128,000).
//   - o-series reasoning models: o200k_base; the same 65,536 training limit
//     is listed for o4-mini reinforcement fine-tuning.
//   - gpt-3.5-turbo-0613: 4,096; later gpt-3.5-turbo snapshots: 16,385.
//   - gpt-4-0613: 8,192.
//   - Claude 3 Haiku on Bedrock: 32,000 per record. Claude's own tokenizer is
//     not public; cl100k_base is used as an estimate, which is why the limit
//     is the documented one and not padded.
var modelPrefixes = []struct {
	prefix string
	model  Model
}{
	{"gpt-4o-mini", Model{O200K, 65536}},
	{"gpt-4o", Model{O200K, 65536}},
	{"gpt-4.1", Model{O200K, 65536}},
	{"o1", Model{O200K, 65536}},
	{"o3", Model{O200K, 65536}},
	{"o4", Model{O200K, 65536}},
	{"gpt-3.5-turbo-0613", Model{CL100K, 4096}},
	{"gpt-3.5-turbo", Model{CL100K, 16385}},
	{"gpt-4", Model{CL100K, 8192}},
	{"claude-3-haiku", Model{CL100K, 32000}},
}

// ModelInfo returns the encoding and training context for a base model name.
// It accepts fine-tuned model ids ("ft:gpt-4o-mini-2024-07-18:org::id"),
// provider-qualified names ("openai/gpt-4o") and Bedrock model ids
// ("anthropic.claude-3-haiku-20240307-v1:0"). Unknown models get cl100k_base
// and an unknown (0) context.
func ModelInfo(baseModel string) Model {
	name := strings.ToLower(strings.TrimSpace(baseModel))
	name = strings.TrimPrefix(name, "ft:")
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	// Bedrock ids may carry a cross-region prefix ("us.") and a vendor
	// prefix ("anthropic.") before the model name.
	if i := strings.Index(name, "claude"); i > 0 {
		name = name[i:]
	}
	for _, p := range modelPrefixes {
		if strings.HasPrefix(name, p.prefix) {
			return p.model
		}
	}
	return Model{Encoding: CL100K}
}
