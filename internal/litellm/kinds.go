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

// prefixKinds maps the LiteLLM provider prefix of litellm_params.model to
// a rolter provider kind. "openai/" with an api_base is LiteLLM's way of
// saying "any OpenAI-compatible server", which is rolter's openai kind too.
// LiteLLM's vllm/ runs vLLM in-process; rolter can only reach vLLM over
// HTTP, so vllm/ needs an api_base exactly like hosted_vllm/.
var prefixKinds = map[string]string{
	"openai":      store.KindOpenAI,
	"anthropic":   store.KindAnthropic,
	"hosted_vllm": store.KindVLLM,
	"vllm":        store.KindVLLM,
	"sglang":      store.KindSGLang,
	"llamacpp":    store.KindLlamaCpp,
	"llama_cpp":   store.KindLlamaCpp,
	"llamafile":   store.KindLlamaCpp,
}

// Prefixes lists the LiteLLM prefixes the importer maps, sorted.
func Prefixes() []string {
	out := make([]string, 0, len(prefixKinds))
	for p := range prefixKinds {
		out = append(out, p+"/")
	}
	slices.Sort(out)
	return out
}

// foreignProviders are LiteLLM providers rolter has no kind for. A model
// string starting with one of them is refused rather than read as an
// unprefixed model name ("azure/gpt-4o" is not a model called that on
// OpenAI). A first segment that is not a LiteLLM provider at all, as in
// "Qwen/Qwen3-8B", is part of the model name.
var foreignProviders = []string{
	"ai21", "aleph_alpha", "anyscale", "azure", "azure_ai", "azure_text", "baseten",
	"bedrock", "cerebras", "clarifai", "cloudflare", "codestral", "cohere", "cohere_chat",
	"custom_openai", "dashscope", "databricks", "deepinfra", "deepseek", "fireworks_ai",
	"friendliai", "gemini", "github", "groq", "huggingface", "hyperbolic", "lambda_ai",
	"litellm_proxy", "lm_studio", "mistral", "moonshot", "nebius", "nlp_cloud", "novita",
	"nvidia_nim", "ollama", "ollama_chat", "openrouter", "palm", "perplexity", "petals",
	"predibase", "replicate", "sagemaker", "sambanova", "snowflake", "text-completion-openai",
	"together_ai", "triton", "vertex_ai", "vertex_ai_beta", "volcengine", "voyage", "watsonx",
	"xai",
}

// SplitModel maps litellm_params.model to a rolter kind and the upstream
// model: the text before the first '/' is the provider prefix, the rest is
// the model ("hosted_vllm/Qwen/Qwen3-8B" is kind vllm, model
// "Qwen/Qwen3-8B"). Without a known prefix the whole string is an OpenAI
// model, as in LiteLLM.
func SplitModel(model string) (kind, upstream string, err error) {
	if model == "" {
		return "", "", errors.New("is required")
	}
	prefix, rest, found := strings.Cut(model, "/")
	if !found {
		return store.KindOpenAI, model, nil
	}
	if k, ok := prefixKinds[prefix]; ok {
		if rest == "" {
			return "", "", fmt.Errorf("names no model after %s/", prefix)
		}
		return k, rest, nil
	}
	if slices.Contains(foreignProviders, prefix) {
		return "", "", fmt.Errorf("LiteLLM provider %s/ has no rolter equivalent; rolter imports %s (for another OpenAI-compatible service write openai/<model> with its api_base)",
			prefix, strings.Join(Prefixes(), ", "))
	}
	return store.KindOpenAI, model, nil
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
	if apiBase == "" {
		if d, ok := defaultBases[kind]; ok {
			return d, nil
		}
		return "", fmt.Errorf("is required for %s servers: rolter has no default address for them", kind)
	}
	if err := checkURL(apiBase); err != nil {
		return "", err
	}
	base := strings.TrimRight(apiBase, "/")
	if kind == store.KindAnthropic {
		u, _ := url.Parse(base) // checked above
		switch {
		case u.Path == "":
			base += "/v1"
		case strings.HasSuffix(u.Path, "/v1/messages"):
			base = strings.TrimSuffix(base, "/messages")
		}
	}
	return base, nil
}

// maxName is the admin API's limit on provider names.
const maxName = 200

// ProviderName is the display name of an imported provider:
// "<kind> <host[:port][path]>" from its base URL, e.g.
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
