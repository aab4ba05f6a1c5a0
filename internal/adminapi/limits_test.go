package adminapi_test

import (
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// TestRateLimitFieldsAPI: rpm_limit and tpm_limit on projects, routes and
// keys are created, patched and shown; a negative or oversized limit is a
// 400 naming the field and changes nothing.
func TestRateLimitFieldsAPI(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.ok("POST", "/orgs/default/providers", `{"name":"vllm","kind":"vllm","base_url":"http://a:1/v1","keys":[{"secret":"sk-1"}]}`, 201)
		p := e.ok("POST", "/orgs/default/projects", `{"name":"team","rpm_limit":600,"tpm_limit":90000}`, 201)
		if p["rpm_limit"] != 600.0 || p["tpm_limit"] != 90000.0 {
			t.Fatalf("created project = %v", p)
		}
		r := e.ok("POST", "/orgs/default/projects/team/routes", `{"model":"qwen3","targets":[{"provider":"vllm"}],"rpm_limit":60,"tpm_limit":1000}`, 201)
		if r["rpm_limit"] != 60.0 || r["tpm_limit"] != 1000.0 {
			t.Fatalf("created route = %v", r)
		}
		p = e.ok("PATCH", "/orgs/default/projects/team", `{"tpm_limit":0}`, 200)
		if p["rpm_limit"] != 600.0 || p["tpm_limit"] != nil {
			t.Fatalf("patched project = %v", p)
		}
		r = e.ok("PATCH", "/orgs/default/projects/team/routes/qwen3", `{"rpm_limit":5}`, 200)
		if r["rpm_limit"] != 5.0 || r["tpm_limit"] != 1000.0 {
			t.Fatalf("patched route = %v", r)
		}
		if g := e.ok("GET", "/orgs/default/projects/team", "", 200); g["rpm_limit"] != 600.0 {
			t.Fatalf("get project = %v", g)
		}
		if g := e.ok("GET", "/orgs/default/projects/team/routes/qwen3", "", 200); g["rpm_limit"] != 5.0 {
			t.Fatalf("get route = %v", g)
		}

		before := e.state()
		for _, c := range []struct{ method, path, body, field string }{
			{"POST", "/orgs/default/projects", `{"name":"x","rpm_limit":-1}`, "rpm_limit"},
			{"POST", "/orgs/default/projects", `{"name":"x","tpm_limit":1000000001}`, "tpm_limit"},
			{"PATCH", "/orgs/default/projects/default", `{"rpm_limit":-5}`, "rpm_limit"},
			{"POST", "/orgs/default/projects/default/routes", `{"model":"m","targets":[{"provider":"vllm"}],"tpm_limit":-1}`, "tpm_limit"},
			{"PATCH", "/orgs/default/projects/team/routes/qwen3", `{"rpm_limit":1000000001}`, "rpm_limit"},
			{"POST", "/orgs/default/projects/default/keys", `{"name":"k","rpm_limit":1000000001}`, "rpm_limit"},
			{"POST", "/orgs/default/projects/default/keys", `{"name":"k","tpm_limit":-3}`, "tpm_limit"},
		} {
			errObj := e.fail(c.method, c.path, c.body, 400, admin.CodeValidation)
			if f, _ := errObj["fields"].(map[string]any); f[c.field] == nil {
				t.Errorf("%s %s %s: fields = %v, want %q", c.method, c.path, c.body, errObj["fields"], c.field)
			}
		}
		if g := e.ok("GET", "/orgs/default/projects/team/routes/qwen3", "", 200); g["rpm_limit"] != 5.0 {
			t.Fatalf("route after bad patch = %v", g)
		}
		if after := e.state(); after != before {
			t.Fatalf("bad input changed state:\n%s\n%s", before, after)
		}
	})
}
