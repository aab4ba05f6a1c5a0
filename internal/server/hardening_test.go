package server_test

import (
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
)

// TestScenario36_MetricsTokenAndOrgLabels: with a metrics token, /metrics
// answers only to it (any case of "Bearer"); and route series carry org
// and project, so two orgs' routes named alike stay apart.
func TestScenario36_MetricsTokenAndOrgLabels(t *testing.T) {
	const adminTok, metricsTok = "ra-scenario36-admin-FAKE", "metrics-token-scenario36-FAKE"
	r := start(t, server.Config{DataDir: t.TempDir(), Demo: true, AdminToken: secret.New(adminTok), MetricsToken: secret.New(metricsTok)})
	defer r.srv.Shutdown()
	for _, tok := range []string{"", "wrong-token-of-some-length", adminTok} {
		if code, body := r.call(t, "GET", "/metrics", tok, ""); code != 401 || strings.Contains(body, "rolter_") {
			t.Fatalf("token %q: %d %s", tok, code, body)
		}
	}

	// Two orgs, each with a route "qwen3" on its own demo provider.
	demoBase := "http://" + r.srv.Addr + "/demo/v1"
	var keys []string
	for _, org := range []string{"acme", "globex"} {
		admin := func(path, body string) string {
			t.Helper()
			code, out := r.call(t, "POST", "/admin/v1"+path, adminTok, body)
			if code != 201 {
				t.Fatalf("POST %s: %d %s", path, code, out)
			}
			return out
		}
		admin("/orgs", `{"name":"`+org+`"}`)
		admin("/orgs/"+org+"/projects", `{"name":"team"}`)
		admin("/orgs/"+org+"/providers", `{"name":"up","kind":"vllm","base_url":"`+demoBase+`","models":["demo-model"]}`)
		admin("/orgs/"+org+"/projects/team/routes", `{"model":"qwen3","targets":[{"provider":"up","upstream_model":"demo-model"}]}`)
		keys = append(keys, extract(admin("/orgs/"+org+"/projects/team/keys", `{"name":"k"}`), `"secret":"`))
	}
	for i, key := range keys {
		for range i + 1 { // acme once, globex twice
			if code, body := r.call(t, "POST", "/v1/chat/completions", key, `{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}`); code != 200 {
				t.Fatalf("org %d: %d %s", i, code, body)
			}
		}
	}
	code, body := r.call(t, "GET", "/metrics", "", "")
	if code != 401 {
		t.Fatalf("no token: %d", code)
	}
	code, body = r.callAuth(t, "GET", "/metrics", "bearer "+metricsTok)
	if code != 200 {
		t.Fatalf("lowercase bearer: %d %s", code, body)
	}
	for _, want := range []string{
		`rolter_requests_total{class="",org="acme",project="team",provider="up",route="qwen3",status="200"} 1`,
		`rolter_requests_total{class="",org="globex",project="team",provider="up",route="qwen3",status="200"} 2`,
		`rolter_upstream_attempts_total{class="ok",org="acme",provider="up"} 1`,
		`rolter_upstream_attempts_total{class="ok",org="globex",provider="up"} 2`,
		`rolter_request_duration_seconds_count{org="globex",project="team",route="qwen3"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, metricsTok) {
		t.Fatal("the metrics token is in the metrics")
	}
}
