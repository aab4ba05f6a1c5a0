package config_test

import (
	"testing"

	"github.com/rolter/rolter/internal/config"
	"github.com/rolter/rolter/internal/store"
)

// A config file sets provider and group policies as it sets route ones,
// and the import refuses metadata_source upstream on a hosted kind.
func TestApplyPolicies(t *testing.T) {
	each(t, func(t *testing.T, h *harness) {
		f, err := config.Parse([]byte(`
orgs:
  - name: acme
    providers:
      - slug: p
        kind: vllm
        base_url: http://10.0.0.5:8000/v1
        policy: {tools: deny, max_output_tokens: 100, max_concurrency: 3}
    groups:
      - slug: g
        members: [{provider: p}]
        policy: {media: deny}
`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.apply(t, f); err != nil {
			t.Fatal(err)
		}
		if got := h.provider(t, "acme", "p").Settings.Policy; got != (store.Policy{Tools: "deny", MaxOutputTokens: 100, MaxConcurrency: 3}) {
			t.Fatalf("provider policy %+v", got)
		}
		if got := h.group(t, "acme", "g").Policy; got != (store.Policy{Media: "deny"}) {
			t.Fatalf("group policy %+v", got)
		}
		bad, err := config.Parse([]byte(`
orgs:
  - name: acme
    providers:
      - slug: hosted
        kind: openai
        base_url: https://api.openai.com/v1
        metadata_source: upstream
`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.apply(t, bad); err == nil {
			t.Fatal("metadata_source upstream on an openai provider was imported")
		} else {
			t.Logf("refused: %v", err)
		}
	})
}
