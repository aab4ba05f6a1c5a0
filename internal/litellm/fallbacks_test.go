package litellm_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/litellm"
	"github.com/rolter/rolter/internal/store"
)

// Issue 19: fallbacks and context_window_fallbacks map onto routes'
// fallbacks and context fallback, litellm_params.order onto target
// priorities. What the admin API would refuse (a cycle, a chain deeper
// than 3, a name that is no route) is left out with a note, and the rest
// is imported.
func TestImportFallbacks(t *testing.T) {
	y := `model_list:
- {model_name: a, litellm_params: {model: hosted_vllm/a, api_base: 'http://h:8000/v1'}}
- {model_name: a, litellm_params: {model: openai/gpt-4o, api_key: sk-import-fallback-0001, order: 2}}
- {model_name: b, litellm_params: {model: hosted_vllm/b, api_base: 'http://h:8000/v1'}}
- {model_name: c, litellm_params: {model: hosted_vllm/c, api_base: 'http://h:8000/v1'}}
- {model_name: d, litellm_params: {model: hosted_vllm/d, api_base: 'http://h:8000/v1'}}
- {model_name: e, litellm_params: {model: hosted_vllm/e, api_base: 'http://h:8000/v1'}}
- {model_name: big, litellm_params: {model: hosted_vllm/big, api_base: 'http://h:8000/v1'}}
router_settings:
  fallbacks: [{a: [b, nowhere]}, {b: [a, c]}, {c: [d]}, {d: [e]}]
  content_policy_fallbacks: [{a: [b]}]
litellm_settings:
  context_window_fallbacks: [{a: [big, e]}]
`
	cfg, err := litellm.Parse([]byte(y), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Warnings {
		if strings.Contains(w, ".fallbacks") || strings.Contains(w, "context_window_fallbacks:") && strings.HasPrefix(w, "ignored") {
			t.Errorf("a mapped setting is reported ignored: %s", w)
		}
	}
	if !strings.Contains(strings.Join(cfg.Warnings, "\n"), "ignored router_settings.content_policy_fallbacks") {
		t.Errorf("content_policy_fallbacks not reported: %q", cfg.Warnings)
	}
	each(t, func(t *testing.T, h *harness) {
		out := h.run(t, cfg, litellm.Options{})
		ctx := context.Background()
		pj, err := h.db.GetProject(ctx, mustOrg(t, h, "default").ID, "default")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		prio := map[string][]int{}
		rs, _ := h.db.ListRoutes(ctx, pj.ID, store.Page{Limit: 100})
		for _, r := range rs {
			got[r.Model] = append(r.Fallbacks, "ctx:"+r.ContextFallback)
			for _, tg := range r.Targets {
				prio[r.Model] = append(prio[r.Model], tg.Priority)
			}
		}
		want := map[string][]string{
			"a": {"b", "ctx:big"}, // nowhere is no route
			"b": {"c", "ctx:"},    // b -> a is a cycle
			"c": {"d", "ctx:"},
			"d": {"ctx:"}, // b -> c -> d -> e is 3 deep, a -> b -> c -> d -> e 4
			"e": {"ctx:"}, "big": {"ctx:"},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("routes' fallbacks:\n got %v\nwant %v\n%s", got, want, out)
		}
		if !reflect.DeepEqual(prio["a"], []int{0, 2}) {
			t.Errorf("priorities of a: %v", prio["a"])
		}
		for _, line := range []string{
			`fallback "nowhere" of route "a" left out: it is no route of the file or the project`,
			`fallback "a" of route "b" left out: it would make a cycle`,
			`fallback "e" of route "d" left out: chains of fallbacks are at most 3 deep`,
			`a rolter route has one context fallback: "a" keeps "big", not "e"`,
			"created route a: ",
		} {
			if !strings.Contains(out, line) {
				t.Errorf("output lacks %q:\n%s", line, out)
			}
		}
	})
}
