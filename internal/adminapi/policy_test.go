package adminapi_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// Providers and groups take the same policy fields as routes: on create,
// patch and view, validated alike; a bad one is a 400 naming the field that
// changes nothing.
func TestProviderAndGroupPolicy(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		p := e.ok("POST", "/orgs/default/providers", `{"slug":"p","kind":"vllm","base_url":"http://10.0.0.5:8000/v1",
			"policy":{"tools":"deny","max_output_tokens":100,"max_concurrency":2}}`, 201)
		want := map[string]any{"tools": "deny", "max_output_tokens": float64(100), "max_concurrency": float64(2)}
		if !reflect.DeepEqual(p["policy"], want) {
			t.Fatalf("created provider policy: %v", p["policy"])
		}
		p = e.ok("PATCH", "/orgs/default/providers/p", `{"policy":{"media":"deny"}}`, 200)
		if !reflect.DeepEqual(p["policy"], map[string]any{"media": "deny"}) {
			t.Fatalf("patched provider policy: %v", p["policy"])
		}
		for body, field := range map[string]string{
			`{"policy":{"tools":"maybe"}}`:        "policy.tools",
			`{"policy":{"media":"no"}}`:           "policy.media",
			`{"policy":{"max_output_tokens":-1}}`: "policy.max_output_tokens",
			`{"policy":{"max_concurrency":-5}}`:   "policy.max_concurrency",
		} {
			errObj := e.fail("PATCH", "/orgs/default/providers/p", body, 400, admin.CodeValidation)
			if f, _ := errObj["fields"].(map[string]any); f[field] == nil {
				t.Fatalf("%s: fields %v do not name %s", body, errObj["fields"], field)
			}
		}
		if got := e.ok("GET", "/orgs/default/providers/p", "", 200); !reflect.DeepEqual(got["policy"], map[string]any{"media": "deny"}) {
			t.Fatalf("a refused patch changed the policy: %v", got["policy"])
		}
		e.fail("POST", "/orgs/default/providers", `{"slug":"q","kind":"vllm","base_url":"http://10.0.0.5:8000/v1","policy":{"tools":"x"}}`,
			400, admin.CodeValidation)
		e.fail("GET", "/orgs/default/providers/q", "", 404, admin.CodeNotFound)

		g := e.ok("POST", "/orgs/default/groups", `{"slug":"g","members":[{"provider":"p"}],"policy":{"max_output_tokens":50,"tools":"deny"}}`, 201)
		if !reflect.DeepEqual(g["policy"], map[string]any{"max_output_tokens": float64(50), "tools": "deny"}) {
			t.Fatalf("created group policy: %v", g["policy"])
		}
		g = e.ok("PATCH", "/orgs/default/groups/g", `{"policy":{"media":"deny"}}`, 200)
		if !reflect.DeepEqual(g["policy"], map[string]any{"media": "deny"}) {
			t.Fatalf("patched group policy: %v", g["policy"])
		}
		e.fail("PATCH", "/orgs/default/groups/g", `{"policy":{"max_concurrency":-1}}`, 400, admin.CodeValidation)
		if got := e.ok("GET", "/orgs/default/groups/g", "", 200); !reflect.DeepEqual(got["policy"], map[string]any{"media": "deny"}) {
			t.Fatalf("group policy after a refused patch: %v", got["policy"])
		}
	})
}

// design 003: discovery needs one server serving one model. A hosted API
// lists many, so metadata_source "upstream" is refused there, saying why.
func TestUpstreamMetadataRefusedOnHostedKinds(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		for _, kind := range []string{"openai", "anthropic"} {
			errObj := e.fail("POST", "/orgs/default/providers",
				`{"slug":"h-`+kind+`","kind":"`+kind+`","base_url":"https://api.example.com/v1","metadata_source":"upstream"}`, 400, admin.CodeValidation)
			f, _ := errObj["fields"].(map[string]any)
			if msg, _ := f["metadata_source"].(string); !strings.Contains(msg, "hosted") || !strings.Contains(msg, "many models") {
				t.Fatalf("%s: the refusal does not say why: %v", kind, errObj)
			}
			e.fail("GET", "/orgs/default/providers/h-"+kind, "", 404, admin.CodeNotFound)
			// Nor can a patch switch an existing hosted provider over.
			e.ok("POST", "/orgs/default/providers", `{"slug":"c-`+kind+`","kind":"`+kind+`","base_url":"https://api.example.com/v1"}`, 201)
			e.fail("PATCH", "/orgs/default/providers/c-"+kind, `{"metadata_source":"upstream"}`, 400, admin.CodeValidation)
		}
		for _, kind := range []string{"vllm", "sglang", "llamacpp"} {
			e.ok("POST", "/orgs/default/providers", `{"slug":"u-`+kind+`","kind":"`+kind+`","base_url":"http://10.0.0.5:8000/v1","metadata_source":"upstream"}`, 201)
		}
	})
}
