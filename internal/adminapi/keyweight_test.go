package adminapi_test

import (
	"strconv"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// A pool key's weight changes in place (PATCH .../keys/{id}); a bad
// weight, a missing one, an unknown key and a deleted provider are
// refused and change nothing.
func TestProviderKeyWeight(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		p := e.ok("POST", "/orgs/default/providers", `{"name":"vllm","kind":"vllm","base_url":"http://10.0.0.5:8000/v1","keys":[{"secret":"sk-1","weight":2}]}`, 201)
		id := strconv.FormatInt(int64(p["keys"].([]any)[0].(map[string]any)["id"].(float64)), 10)
		path := "/orgs/default/providers/vllm/keys/" + id
		weight := func() float64 {
			t.Helper()
			got := e.ok("GET", "/orgs/default/providers/vllm", "", 200)
			return got["keys"].([]any)[0].(map[string]any)["weight"].(float64)
		}
		if k := e.ok("PATCH", path, `{"weight":5}`, 200); k["weight"].(float64) != 5 || k["id"].(float64) != p["keys"].([]any)[0].(map[string]any)["id"].(float64) {
			t.Fatalf("patched key: %v", k)
		}
		if w := weight(); w != 5 {
			t.Fatalf("weight after the patch: %v", w)
		}
		e.ok("PATCH", path, `{"weight":0}`, 200)
		if w := weight(); w != 0 {
			t.Fatalf("weight 0 (out of rotation): %v", w)
		}
		for _, c := range []struct {
			name, path, body string
			status           int
			code             string
		}{
			{"negative", path, `{"weight":-1}`, 400, admin.CodeValidation},
			{"too large", path, `{"weight":1000001}`, 400, admin.CodeValidation},
			{"missing", path, `{}`, 400, admin.CodeValidation},
			{"unknown field", path, `{"secret":"x"}`, 400, admin.CodeUnknownField},
			{"unknown key", "/orgs/default/providers/vllm/keys/999999", `{"weight":3}`, 404, admin.CodeNotFound},
			{"not an id", "/orgs/default/providers/vllm/keys/abc", `{"weight":3}`, 404, admin.CodeNotFound},
		} {
			e.fail("PATCH", c.path, c.body, c.status, c.code)
			if w := weight(); w != 0 {
				t.Fatalf("%s: weight changed to %v", c.name, w)
			}
		}
		e.ok("DELETE", "/orgs/default/providers/vllm", "", 204)
		e.fail("PATCH", path, `{"weight":3}`, 404, admin.CodeNotFound)
	})
}
