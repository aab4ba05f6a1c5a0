package adminapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// POST /apply over HTTP: its query is checked before the body, a failure
// answers the entry's error (path before the message, fields under the
// path) and writes nothing, and the plan comes back without key secrets.
func TestApplyEndpoint(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		const body = `{"orgs": [{"name": "acme", "providers": [{"slug": "vllm", "kind": "vllm",
			"base_url": "http://10.0.0.5:8000/v1", "keys": [{"secret": "sk-FAKE-apply-api-1", "ref": "VLLM_KEY"}]}],
			"projects": [{"name": "web", "routes": [{"model": "a", "targets": [{"provider": "vllm"}]},
				{"model": "b", "targets": [{"provider": "nope"}]}]}]}]}`
		e.fail("POST", "/apply?dry_run=maybe", body, 400, admin.CodeValidation)
		e.fail("POST", "/apply", `{"orgs": [{"name": "acme", "colour": "red"}]}`, 400, admin.CodeUnknownField)
		before := e.state()
		errObj := e.fail("POST", "/apply", body, 400, admin.CodeUnknownProvider)
		if msg := errObj["message"].(string); !strings.HasPrefix(msg, `orgs[0].projects[0].routes[1] (route "acme/web/b"): `) {
			t.Errorf("message = %q", msg)
		}
		if f := errObj["fields"].(map[string]any); f["orgs[0].projects[0].routes[1].targets[0].provider"] != "no such provider" {
			t.Errorf("fields = %v", f)
		}
		if after := e.state(); after != before {
			t.Fatalf("a failed apply wrote:\n%s\n%s", before, after)
		}

		fixed := strings.Replace(body, `"provider": "nope"`, `"provider": "vllm"`, 1)
		code, out := e.do("POST", "/apply?dry_run=true", fixed)
		if code != 200 || !strings.Contains(out, `"dry_run":true`) || strings.Contains(out, "sk-FAKE") {
			t.Fatalf("dry run: %d %s", code, out)
		}
		if after := e.state(); after != before {
			t.Fatal("a dry run wrote")
		}
		e.ok("POST", "/apply", fixed, 200)
		exp := e.ok("GET", "/export", "", 200)
		if s := mustJSON(t, exp); !strings.Contains(s, `"keys":[{"ref":"VLLM_KEY","weight":1}]`) || strings.Contains(s, "sk-FAKE") {
			t.Fatalf("export: %s", s)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
