package serving

// CanChat reports whether Curate can send chat completions to what a
// target of this kind serves: a vLLM server exposes an OpenAI-compatible
// API for its loaded adapters, and a provider answers for its hosted
// models (fine-tuned ones by their model id) at its own chat completions;
// a webhook's pipeline serves elsewhere.
func CanChat(kind string) bool { return kind == KindVLLM || kind == KindOpenAI }

// OpenAIBaseURL is where a provider target with no address of its own is
// called, when the server names no other (OPENAI_BASE_URL): OpenAI's API.
const OpenAIBaseURL = "https://api.openai.com/v1"

// CanScore reports whether Curate can send answers to score to what a
// target of this kind serves: a vLLM server running its pooling runner.
func CanScore(kind string) bool { return kind == KindVLLMPooling }
