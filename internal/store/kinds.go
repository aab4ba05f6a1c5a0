package store

// Provider kinds: the values of Provider.Kind (SPEC §2). The kind says
// which API the upstream speaks and how its readiness is probed. They are
// untyped string constants, so Provider.Kind stays a plain string and code
// that compares it to a literal keeps compiling while it moves to these
// names.
const (
	KindOpenAI    = "openai"    // OpenAI API, hosted or compatible
	KindAnthropic = "anthropic" // Anthropic Messages API
	KindVLLM      = "vllm"      // self-hosted vLLM (OpenAI API)
	KindSGLang    = "sglang"    // self-hosted SGLang (OpenAI API)
	KindLlamaCpp  = "llamacpp"  // self-hosted llama.cpp server (OpenAI API)
)

// ProviderKinds lists every provider kind, hosted first. Callers must not
// modify it.
var ProviderKinds = []string{KindOpenAI, KindAnthropic, KindVLLM, KindSGLang, KindLlamaCpp}

// Metadata sources: the values of Provider.MetadataSource (SPEC §5). They
// say where a provider's model id and context length come from.
const (
	// MetadataConfigured: the provider's configured models and context
	// limit are taken as they are.
	MetadataConfigured = "configured"
	// MetadataUpstream: the model id and context length are discovered from
	// the upstream (self-hosted kinds only).
	MetadataUpstream = "upstream"
)
