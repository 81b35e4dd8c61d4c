package serving

// CanChat reports whether Curate can send chat completions to what a
// target of this kind serves: only a vLLM server exposes an
// OpenAI-compatible API for its loaded adapters; a provider's hosted
// models are reached through a registered endpoint, and a webhook's
// pipeline serves elsewhere.
func CanChat(kind string) bool { return kind == KindVLLM }

// CanScore reports whether Curate can send answers to score to what a
// target of this kind serves: a vLLM server running its pooling runner.
func CanScore(kind string) bool { return kind == KindVLLMPooling }
