package litellm

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/rolter/rolter/internal/store"
)

// prefix is what rolter makes of a LiteLLM provider prefix.
type prefix struct {
	name string // the LiteLLM prefix, without '/'
	kind string // the rolter provider kind
	// defaultBase is LiteLLM's address for the prefix when an entry has no
	// api_base; "" falls back to the kind's public endpoint, if any.
	defaultBase string
	// v1 puts /v1 after an api_base without a path: LiteLLM talks to
	// Ollama's own API at the server root, rolter to the OpenAI-compatible
	// API that the same server offers under /v1.
	v1 bool
}

// label names the kind in a provider's display name: the prefix where the
// kind alone would mislead ("ollama", not "openai").
func (p prefix) label() string {
	if p.kind == store.KindOpenAI && p.name != "" && p.name != "openai" {
		return p.name
	}
	return p.kind
}

// prefixes maps the LiteLLM provider prefix of litellm_params.model to a
// rolter provider kind. "openai/" with an api_base is LiteLLM's way of
// saying "any OpenAI-compatible server", which is rolter's openai kind too;
// Ollama and LM Studio serve that API as well. LiteLLM's vllm/ runs vLLM
// in-process; rolter can only reach vLLM over HTTP, so vllm/ needs an
// api_base exactly like hosted_vllm/.
var prefixes = map[string]prefix{
	"openai":      {kind: store.KindOpenAI},
	"anthropic":   {kind: store.KindAnthropic},
	"hosted_vllm": {kind: store.KindVLLM},
	"vllm":        {kind: store.KindVLLM},
	"sglang":      {kind: store.KindSGLang},
	"llamacpp":    {kind: store.KindLlamaCpp},
	"llama_cpp":   {kind: store.KindLlamaCpp},
	"llamafile":   {kind: store.KindLlamaCpp},
	"ollama":      {kind: store.KindOpenAI, defaultBase: "http://localhost:11434", v1: true},
	"ollama_chat": {kind: store.KindOpenAI, defaultBase: "http://localhost:11434", v1: true},
	"lm_studio":   {kind: store.KindOpenAI, defaultBase: "http://localhost:1234/v1"},
}

// Prefixes lists the LiteLLM prefixes the importer maps, sorted.
func Prefixes() []string {
	out := make([]string, 0, len(prefixes))
	for p := range prefixes {
		out = append(out, p+"/")
	}
	slices.Sort(out)
	return out
}

// foreignProviders are LiteLLM providers rolter has no kind for. An entry
// whose model starts with one of them is skipped, as is one whose first
// segment is no LiteLLM provider at all: LiteLLM refuses such a model
// too, unless custom_llm_provider names the provider.
var foreignProviders = []string{
	"ai21", "aleph_alpha", "anyscale", "azure", "azure_ai", "azure_text", "baseten",
	"bedrock", "cerebras", "clarifai", "cloudflare", "codestral", "cohere", "cohere_chat",
	"custom_openai", "dashscope", "databricks", "deepinfra", "deepseek", "fireworks_ai",
	"friendliai", "gemini", "github", "groq", "huggingface", "hyperbolic", "lambda_ai",
	"litellm_proxy", "mistral", "moonshot", "nebius", "nlp_cloud", "novita",
	"nvidia_nim", "openrouter", "palm", "perplexity", "petals",
	"predibase", "replicate", "sagemaker", "sambanova", "snowflake", "text-completion-openai",
	"together_ai", "triton", "vertex_ai", "vertex_ai_beta", "volcengine", "voyage", "watsonx",
	"xai",
}

// UnsupportedError is a model string rolter cannot serve: the import
// skips its entry rather than failing.
type UnsupportedError struct{ Reason string }

func (e *UnsupportedError) Error() string { return e.Reason }

func unsupported(format string, args ...any) error {
	return &UnsupportedError{Reason: fmt.Sprintf(format, args...)}
}

// SplitModel maps litellm_params.model to a rolter kind and the upstream
// model: the text before the first '/' is the provider prefix, the rest is
// the model ("hosted_vllm/Qwen/Qwen3-8B" is kind vllm, model
// "Qwen/Qwen3-8B"). Without a '/' the whole string is an OpenAI model, as
// in LiteLLM. A prefix rolter has no kind for, or one that is no LiteLLM
// provider, is an *UnsupportedError.
func SplitModel(model string) (kind, upstream string, err error) {
	p, upstream, err := splitModel(model)
	return p.kind, upstream, err
}

func splitModel(model string) (prefix, string, error) {
	if model == "" {
		return prefix{}, "", errors.New("is required")
	}
	name, rest, found := strings.Cut(model, "/")
	if !found {
		return prefix{name: "openai", kind: store.KindOpenAI}, model, nil
	}
	if p, ok := prefixes[name]; ok {
		if rest == "" {
			return prefix{}, "", fmt.Errorf("names no model after %s/", name)
		}
		p.name = name
		return p, rest, nil
	}
	if slices.Contains(foreignProviders, name) {
		return prefix{}, "", unsupported("LiteLLM provider %s/ has no rolter equivalent; rolter imports %s (for another OpenAI-compatible service write openai/<model> with its api_base)",
			name, strings.Join(Prefixes(), ", "))
	}
	return prefix{}, "", unsupported("%s/ is not a LiteLLM provider prefix rolter knows (prefixes are lower case); write openai/%s with an api_base for an OpenAI-compatible server, or set custom_llm_provider",
		name, model)
}

// defaultBases are the public endpoints of the hosted kinds, used when an
// entry has no api_base. Self-hosted kinds have no default.
var defaultBases = map[string]string{
	store.KindOpenAI:    "https://api.openai.com/v1",
	store.KindAnthropic: "https://api.anthropic.com/v1",
}

// BaseURL returns the provider base URL for an entry of kind with the given
// api_base ("" when the entry has none), without a trailing slash.
//
// rolter's base URLs end where the API's paths begin (…/v1), as OpenAI's
// SDK and LiteLLM's openai-compatible providers use api_base. LiteLLM's
// anthropic provider differs: its api_base is the host, and it appends
// /v1/messages itself. So an anthropic api_base without a path gets /v1,
// and one ending in /v1/messages loses /messages.
func BaseURL(kind, apiBase string) (string, error) {
	return prefix{name: kind, kind: kind}.baseURL(apiBase)
}

func (p prefix) baseURL(apiBase string) (string, error) {
	if apiBase == "" {
		apiBase = p.defaultBase
	}
	if apiBase == "" {
		if d, ok := defaultBases[p.kind]; ok {
			return d, nil
		}
		return "", fmt.Errorf("is required for %s servers: rolter has no default address for them", p.kind)
	}
	if err := checkURL(apiBase); err != nil {
		return "", err
	}
	base := strings.TrimRight(apiBase, "/")
	u, _ := url.Parse(base) // checked above
	switch {
	case p.kind == store.KindAnthropic && u.Path == "":
		base += "/v1"
	case p.kind == store.KindAnthropic && strings.HasSuffix(u.Path, "/v1/messages"):
		base = strings.TrimSuffix(base, "/messages")
	case p.v1 && u.Path == "":
		base += "/v1"
	}
	return base, nil
}

// maxName is the admin API's limit on provider names.
const maxName = 200

// ProviderName is the display name of an imported provider:
// "<kind> <host[:port][path]>" from its base URL (the importer passes
// "ollama" for kind where that is the LiteLLM prefix), e.g.
// "vllm 10.0.0.5:8000/v1" or "openai api.openai.com/v1". The scheme is
// dropped, the host lowercased, the port kept only when the URL names one;
// names longer than 200 bytes are cut. Providers that share a base URL but
// not a key get the same name; their slugs tell them apart.
func ProviderName(kind, baseURL string) string {
	u, err := url.Parse(baseURL)
	addr := baseURL
	if err == nil && u.Host != "" {
		addr = strings.ToLower(u.Host) + strings.TrimRight(u.EscapedPath(), "/")
	}
	name := kind + " " + addr
	if len(name) > maxName {
		name = name[:maxName]
		for !utf8.ValidString(name) { // cut inside a rune
			name = name[:len(name)-1]
		}
	}
	return name
}
