package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// TestObservabilityEndToEnd runs what an operator watches (a fleet host
// serving a pool route, a demo route with two targets that fail over and
// cool down, a stream) and checks that the fleet host's state change logs
// its org and provider slug, and that every metric the Grafana dashboard
// in docs/grafana queries is on /metrics afterwards.
func TestObservabilityEndToEnd(t *testing.T) {
	spec, dir := storetest.Spec(t, "sqlite")
	cfg := fleetConfig(spec, dir)
	cfg.Demo = true
	r := start(t, cfg)
	t.Cleanup(func() { _ = r.srv.Shutdown() })
	f := &drainFleet{r: r, tok: drainTok}
	_, body := r.call(t, "POST", "/admin/v1/orgs/default/projects/default/keys", drainTok, `{"name":"client"}`)
	f.vkey = decodeJSON[struct{ Secret string }](t, body).Secret
	_, body = r.call(t, "POST", "/admin/v1/orgs/default/fleet-keys", drainTok, `{"name":"template"}`)
	f.fkey = decodeJSON[struct{ Secret string }](t, body).Secret

	box := newDrainBox(t, false)
	id := f.addHost(t, box, "30s")
	f.assignment(t, id) // a fetch: the liveness age starts
	if code, _, body, err := f.chat(t.Context()); err != nil || code != 200 {
		t.Fatalf("chat to the fleet host: %d %v %s", code, err, body)
	}

	demo := "http://" + r.addr + "/demo/v1"
	for _, p := range []string{"a", "b"} {
		if code, body := r.call(t, "POST", "/admin/v1/orgs/default/providers", drainTok,
			`{"name":"`+p+`","kind":"vllm","base_url":"`+demo+`","context_limit":8192,"forward_headers":["X-Demo-*"],"keys":[{"secret":"sk-obs-FAKE-`+p+`"}]}`); code != 201 {
			t.Fatalf("provider %s: %d %s", p, code, body)
		}
	}
	if code, body := r.call(t, "POST", "/admin/v1/orgs/default/projects/default/routes", drainTok,
		`{"model":"obs","targets":[{"provider":"a","upstream_model":"demo-model"},{"provider":"b","upstream_model":"demo-model"}]}`); code != 201 {
		t.Fatalf("route: %d %s", code, body)
	}
	chat := func(body string, hdr ...string) int {
		req, _ := http.NewRequest("POST", "http://"+r.addr+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.vkey)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := chat(`{"model":"obs","messages":[{"role":"user","content":"hi"}]}`); code != 200 {
		t.Fatalf("chat: %d", code)
	}
	if code := chat(`{"model":"obs","stream":true,"messages":[{"role":"user","content":"hi"}]}`); code != 200 {
		t.Fatalf("stream: %d", code)
	}
	for range 3 { // both targets fail each time: failovers, then the breakers trip
		if code := chat(`{"model":"obs","messages":[]}`, "X-Demo-Status", "503", "X-Request-Id", "obs-fail"); code != 502 && code != 503 {
			t.Fatalf("failing chat: %d", code)
		}
	}

	// The host goes down: deregistered, with its org and provider slug.
	box.healthy.Store(false)
	slug := fmt.Sprintf("provider=host-%d", id)
	testkit.Eventually(t, "the host deregistered", func() bool {
		for _, l := range strings.Split(r.logs.String(), "\n") {
			if strings.Contains(l, "fleet host down: deregistered") && strings.Contains(l, "org=default") &&
				strings.Contains(l, slug) && strings.Contains(l, fmt.Sprintf("host=%d", id)) {
				return true
			}
		}
		return false
	})
	logs := r.logs.String()
	for _, want := range []string{"upstream attempt failed", "failing over to another target", "cooldown began"} {
		if !strings.Contains(logs, "msg=\""+want+"\"") {
			t.Errorf("no %q line", want)
		}
	}
	for _, s := range []string{f.vkey, f.fkey, "sk-obs-FAKE-a", "sk-obs-FAKE-b", drainTok} {
		if strings.Contains(logs, s) {
			t.Errorf("a secret in the logs: %.12s…", s)
		}
	}

	// Every metric the dashboard queries exists.
	names := dashboardMetrics(t)
	var missing []string
	t.Cleanup(func() {
		if len(missing) > 0 {
			t.Logf("dashboard metrics missing from /metrics: %v", missing)
		}
	})
	testkit.Eventually(t, "every dashboard metric on /metrics", func() bool {
		_, metrics := r.call(t, "GET", "/metrics", "", "")
		missing = missing[:0]
		for _, n := range names {
			if !hasFamily(metrics, n) {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0
	})
	if len(names) < 15 {
		t.Fatalf("the dashboard queries only %d metrics: %v", len(names), names)
	}
}

var metricName = regexp.MustCompile(`\brolter_[a-z0-9_]+`)

// dashboardMetrics are the metric names docs/grafana/rolter.json's panel
// queries and variables name.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/grafana/rolter.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		for _, n := range metricName.FindAllString(s, -1) {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			add(tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		add(string(v.Query))
	}
	return out
}

// hasFamily reports whether a /metrics text body has samples of name: a
// family of that name, or a histogram's _bucket, _sum or _count series.
func hasFamily(body, name string) bool {
	if strings.Contains(body, "\n# TYPE "+name+" ") {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && strings.Contains(body, "\n# TYPE "+base+" histogram") {
			return true
		}
	}
	return false
}
