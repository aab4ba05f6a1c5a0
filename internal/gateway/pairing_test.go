package gateway

import "testing"

// TestPairings: each client endpoint and upstream kind gets the pairing the
// data-path docs' table names, and the upstream path that goes with it.
func TestPairings(t *testing.T) {
	for _, tc := range []struct {
		kind, endpoint string
		pair           pairing
		path           string
	}{
		{"openai", "/chat/completions", openAIToOpenAI, "/chat/completions"},
		{"vllm", "/responses", openAIToOpenAI, "/responses"},
		{"vllm", "/embeddings", openAIToOpenAI, "/embeddings"},
		{"openai", "/messages", anthropicToOpenAI, "/chat/completions"},
		{"llamacpp", "/messages/count_tokens", anthropicToOpenAI, "/chat/completions"}, // refused by translate
		{"anthropic", "/chat/completions", openAIToAnthropic, "/messages"},
		{"anthropic", "/embeddings", openAIToOpenAI, "/embeddings"}, // nothing to translate to
		{"anthropic", "/messages", anthropicToAnthropic, "/messages"},
		{"anthropic", "/messages/count_tokens", anthropicToAnthropic, "/messages/count_tokens"},
	} {
		pr := pairingsFor(tc.kind)[apiOf(tc.endpoint)]
		if pr != tc.pair {
			t.Errorf("%s to %s: pairing %#v, want %#v", tc.endpoint, tc.kind, pr, tc.pair)
			continue
		}
		if got := pr.path(tc.endpoint); got != tc.path {
			t.Errorf("%s to %s: path %q, want %q", tc.endpoint, tc.kind, got, tc.path)
		}
		_, isPass := pr.(passThrough)
		if pr.translates() == isPass {
			t.Errorf("%s to %s: translates() is %v for %T", tc.endpoint, tc.kind, pr.translates(), pr)
		}
	}
}
