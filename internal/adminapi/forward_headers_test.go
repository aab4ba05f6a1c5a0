package adminapi_test

import (
	"strings"
	"testing"
)

// TestScenario31_ForwardHeaders: a provider's forward_headers extend the
// data path's header allowlist; credentials, framing and hop-by-hop headers
// can never be added, and a refusal writes nothing. The lowercase "bearer"
// scheme is accepted too (scenario 33).
func TestScenario31_ForwardHeaders(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		create := func(fh string) string {
			return `{"name":"p","kind":"vllm","base_url":"http://10.0.0.5:8000/v1","forward_headers":` + fh + `}`
		}
		before := e.state()
		for _, fh := range []string{`["Authorization"]`, `["x-api-key"]`, `["Cookie"]`, `["Content-Type"]`, `["Host"]`,
			`["Proxy-Authorization"]`, `["X-Request-Id"]`, `["*"]`, `["X-*"]`, `["Auth*"]`, `["bad header"]`, `[""]`,
			`["X-Demo*"]`, `["` + strings.Repeat("a", 65) + `"]`, `[` + strings.Repeat(`"X-A",`, 16) + `"X-A"]`} {
			e.fail("POST", "/orgs/default/providers", create(fh), 400, "validation_failed")
		}
		if e.state() != before {
			t.Fatal("a refused forward_headers changed state")
		}
		v := e.ok("POST", "/orgs/default/providers", create(`["x-trace-*","traceparent"]`), 201)
		got, _ := v["forward_headers"].([]any)
		if len(got) != 2 || got[0] != "X-Trace-*" || got[1] != "Traceparent" {
			t.Fatalf("forward_headers = %v", v["forward_headers"])
		}
		e.fail("PATCH", "/orgs/default/providers/p", `{"forward_headers":["Authorization"]}`, 400, "validation_failed")
		v = e.ok("PATCH", "/orgs/default/providers/p", `{"forward_headers":[]}`, 200)
		if _, ok := v["forward_headers"]; ok {
			t.Fatalf("cleared forward_headers still shown: %v", v)
		}
		if code, body := e.doAuth("GET", "/orgs", "", "bearer "+adminToken); code != 200 {
			t.Fatalf("lowercase bearer: %d %s", code, body)
		}
	})
}
