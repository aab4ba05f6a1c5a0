package config_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/config"
	"github.com/rolter/rolter/internal/store"
)

// TestApplyBackfillsCollidingDerivedSlugs: design 000 "Slug collision
// handling" on the --config / rolter import path. A second provider whose
// name derives a slug already claimed ("VLLM!" after "vLLM") gets "-2"
// with a log line, instead of being logged "exists, left unchanged"; a
// re-run maps both entries to the same slugs and changes nothing; an
// explicit slug that collides is an error naming the entry.
func TestApplyBackfillsCollidingDerivedSlugs(t *testing.T) {
	const file = `orgs:
  - name: acme
    providers:
      - name: vLLM
        kind: vllm
        base_url: http://10.0.0.5:8000/v1
      - name: VLLM!
        kind: vllm
        base_url: http://10.0.0.6:8000/v1
`
	each(t, func(t *testing.T, h *harness) {
		f, err := config.Parse([]byte(file))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.apply(t, f); err != nil {
			t.Fatal(err)
		}
		if p := h.provider(t, "acme", "vllm"); p.BaseURL != "http://10.0.0.5:8000/v1" {
			t.Fatalf("vllm: %+v", p)
		}
		if p := h.provider(t, "acme", "vllm-2"); p.Name != "VLLM!" || p.BaseURL != "http://10.0.0.6:8000/v1" {
			t.Fatalf("vllm-2: %+v", p)
		}
		logs := h.logs.String()
		if strings.Count(logs, "config: slug backfilled") != 1 || !strings.Contains(logs, "base_slug=vllm slug=acme/vllm-2") ||
			strings.Contains(logs, "exists, left unchanged") {
			t.Fatalf("first run's log:\n%s", logs)
		}
		h.logs.Reset()
		if _, err := h.apply(t, f); err != nil {
			t.Fatal(err)
		}
		logs = h.logs.String()
		if n := strings.Count(logs, "exists, left unchanged"); n != 3 || strings.Contains(logs, "slug backfilled") {
			t.Fatalf("re-run: %d unchanged lines, want 3 (org and two providers):\n%s", n, logs)
		}
		ps, err := h.db.ListProviders(context.Background(), h.org(t, "acme").ID, store.Page{Limit: 10})
		if err != nil || len(ps) != 2 {
			t.Fatalf("providers after the re-run: %d %v", len(ps), err)
		}

		clash, err := config.Parse([]byte(file + "      - name: third\n        slug: vllm-2\n        kind: vllm\n        base_url: http://10.0.0.7:8000/v1\n" +
			"      - name: fourth\n        slug: vllm-2\n        kind: vllm\n        base_url: http://10.0.0.8:8000/v1\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.apply(t, clash); err == nil || !strings.Contains(err.Error(), "orgs[0].providers[3]") || !strings.Contains(err.Error(), "orgs[0].providers[2]") {
			t.Fatalf("an explicit slug twice: %v", err)
		}
	})
}
