package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rolter/rolter/internal/cooldown"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
)

// jsonLogTo makes the harness's gateway log JSON at info and above into a
// buffer; lines parses it.
func (h *harness) jsonLogTo() *syncBuffer {
	buf := &syncBuffer{}
	h.gw.log = slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return buf
}

type logLine map[string]any

func logLines(t *testing.T, buf *syncBuffer, msg string) []logLine {
	t.Helper()
	var out []logLine
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m logLine
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON log line: %s", l)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// has reports whether l holds every field of want, with its value.
func (l logLine) has(want map[string]any) bool {
	for k, v := range want {
		got, ok := l[k]
		if !ok {
			return false
		}
		if n, isNum := v.(int); isNum {
			v = float64(n)
		}
		if got != v {
			return false
		}
	}
	return true
}

func findLine(t *testing.T, lines []logLine, what string, want map[string]any) logLine {
	t.Helper()
	for _, l := range lines {
		if l.has(want) {
			return l
		}
	}
	t.Fatalf("no %s line with %v among %v", what, want, lines)
	return nil
}

// requestFields are the fields every data-path line carries.
var requestFields = []string{"request_id", "org", "project", "route", "provider", "class", "upstream_status"}

func checkRequestFields(t *testing.T, l logLine) {
	t.Helper()
	for _, f := range requestFields {
		if _, ok := l[f]; !ok {
			t.Errorf("line %v lacks %q", l, f)
		}
	}
}

// TestObserveFailureLines: an upstream 500, a refused connection, the
// failover between them and the cooldowns they start each log one line
// with the request id, org, project, route, provider slug, class and
// upstream status; the cooldown's end logs too. No secret, virtual key
// or upstream body reaches the log.
func TestObserveFailureLines(t *testing.T) {
	h := newHarness(t, Config{Cooldown: cooldown.Config{Threshold: 1, Base: time.Minute}})
	logs := h.jsonLogTo()
	var fail atomic.Bool
	fail.Store(true)
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if fail.Load() {
			w.WriteHeader(500)
			_, _ = w.Write([]byte(`{"error":"UPSTREAM-BODY-TEXT"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`))
	})
	dead := h.provider("dead", deadURL(t), store.ProviderSettings{}, "sk-DEADKEY-FAKE")
	broken := h.provider("broken", up.base(), store.ProviderSettings{}, "sk-BROKENKEY-FAKE")
	h.route("m", "", store.Target{ProviderID: dead, UpstreamModel: "m", Weight: 1}, store.Target{ProviderID: broken, UpstreamModel: "m", Weight: 1})

	resp := h.post("/v1/chat/completions", `{"model":"m","messages":[]}`, "X-Request-Id", "obs-1")
	if body := readAll(t, resp); resp.StatusCode != 502 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	base := map[string]any{"request_id": "obs-1", "org": "default", "project": "default", "route": "m"}
	with := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	attempts := logLines(t, logs, "upstream attempt failed")
	if len(attempts) != 2 {
		t.Fatalf("%d attempt lines, want 2: %s", len(attempts), logs.String())
	}
	l := findLine(t, attempts, "500", with(map[string]any{"level": "WARN", "provider": "broken", "class": "server_error", "upstream_status": 500}))
	checkRequestFields(t, l)
	l = findLine(t, attempts, "refusal", with(map[string]any{"level": "WARN", "provider": "dead", "class": "connect_error", "upstream_status": 0}))
	checkRequestFields(t, l)
	if !strings.Contains(l["err"].(string), "connection refused") {
		t.Errorf("refusal line without its cause: %v", l)
	}
	fo := logLines(t, logs, "failing over to another target")
	if len(fo) != 1 {
		t.Fatalf("%d failover lines, want 1: %s", len(fo), logs.String())
	}
	checkRequestFields(t, fo[0])
	// The failover names where it goes and why it left the other.
	if fo[0]["level"] != "INFO" || !fo[0].has(base) || fo[0]["provider"] == fo[0]["from_provider"] ||
		(fo[0]["from_provider"] == "dead") != (fo[0]["class"] == "connect_error") {
		t.Errorf("failover line %v", fo[0])
	}
	began := logLines(t, logs, "cooldown began")
	for _, p := range []string{"dead", "broken"} {
		l := findLine(t, began, "cooldown of "+p, with(map[string]any{"level": "WARN", "provider": p, "kind": "target", "upstream_model": "m"}))
		checkRequestFields(t, l)
		if l["cooldown"] == nil || l["until"] == nil {
			t.Errorf("cooldown line without its end: %v", l)
		}
	}

	// The cooldown passes; broken serves again: its half-open probe
	// succeeds and the cooldown ends.
	fail.Store(false)
	h.clock.Advance(2 * time.Minute)
	must(t, h.db.DeleteRoute(context.Background(), routeID(t, h, "m")))
	h.route("m2", "", store.Target{ProviderID: broken, UpstreamModel: "m", Weight: 1})
	resp = h.post("/v1/chat/completions", `{"model":"m2","messages":[]}`, "X-Request-Id", "obs-2")
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	l = findLine(t, logLines(t, logs, "cooldown ended"), "cooldown end", map[string]any{"level": "INFO", "request_id": "obs-2",
		"provider": "broken", "route": "m2", "kind": "target", "class": "", "upstream_status": 200})
	checkRequestFields(t, l)

	out := logs.String()
	for _, s := range []string{"sk-DEADKEY-FAKE", "sk-BROKENKEY-FAKE", h.key, "UPSTREAM-BODY-TEXT"} {
		if strings.Contains(out, s) {
			t.Errorf("the log holds %q", s)
		}
	}
	if strings.Contains(out, `"provider":`+fmt.Sprint(dead)) || strings.Contains(out, `"provider":`+fmt.Sprint(broken)) {
		t.Errorf("a provider named by its number: %s", out)
	}
}

// TestObserveKeyCooldownLine: a 429 cools the pool key; the line names the
// key by its id, never its secret, and rolter_key_cooldown shows it.
func TestObserveKeyCooldownLine(t *testing.T) {
	h := newHarness(t, Config{})
	logs := h.jsonLogTo()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(429)
	})
	p := h.provider("limited", up.base(), store.ProviderSettings{}, "sk-LIMITED-FAKE")
	h.route("r", "", store.Target{ProviderID: p, UpstreamModel: "m", Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"r","messages":[]}`, "X-Request-Id", "obs-429")
	if body := readAll(t, resp); resp.StatusCode != 429 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	keyID := h.snap.Current().Org("default").Providers.At("limited").Keys[0].ID
	l := findLine(t, logLines(t, logs, "cooldown began"), "key cooldown", map[string]any{"level": "WARN", "request_id": "obs-429",
		"provider": "limited", "route": "r", "kind": "key", "key_id": int(keyID), "class": "rate_limited", "upstream_status": 429})
	checkRequestFields(t, l)
	if strings.Contains(logs.String(), "sk-LIMITED-FAKE") {
		t.Error("the key's secret is in the log")
	}
	m, ok := testkit.Series(t, h.reg, "rolter_key_cooldown", map[string]string{"org": "default", "provider": "limited",
		"key": fmt.Sprint(keyID), "state": "cooling"})
	if !ok || m.GetGauge().GetValue() != 1 {
		t.Fatalf("rolter_key_cooldown: %v %v", ok, m)
	}
}

// TestObserveMetrics: a served request counts its tokens and the
// provider's upstream time to first byte and duration, in histograms that
// are both classic (buckets) and native (a schema).
func TestObserveMetrics(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`))
	})
	p := h.provider("good", up.base(), store.ProviderSettings{}, "sk-x")
	h.route("r", "", store.Target{ProviderID: p, UpstreamModel: "m", Weight: 1})
	for range 2 {
		resp := h.post("/v1/chat/completions", `{"model":"r","messages":[]}`)
		if body := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	labels := map[string]string{"org": "default", "project": "default", "route": "r", "provider": "good"}
	for name, want := range map[string]float64{"rolter_prompt_tokens_total": 22, "rolter_completion_tokens_total": 14} {
		if n := counterValue(t, h.reg, name, labels); n != want {
			t.Errorf("%s = %v, want %v", name, n, want)
		}
	}
	if n := counterValue(t, h.reg, "rolter_requests_total", map[string]string{"org": "default", "project": "default",
		"route": "r", "provider": "good", "status": "200", "class": ""}); n != 2 {
		t.Errorf("requests = %v, want 2", n)
	}
	if n := counterValue(t, h.reg, "rolter_upstream_attempts_total", map[string]string{"org": "default", "provider": "good", "class": "ok"}); n != 2 {
		t.Errorf("attempts = %v, want 2", n)
	}
	for _, name := range []string{"rolter_upstream_ttfb_seconds", "rolter_upstream_duration_seconds"} {
		m, ok := testkit.Series(t, h.reg, name, map[string]string{"org": "default", "provider": "good"})
		if !ok {
			t.Fatalf("no %s", name)
		}
		hg := m.GetHistogram()
		if hg.GetSampleCount() != 2 || len(hg.GetBucket()) == 0 || hg.Schema == nil {
			t.Errorf("%s: count %d, %d classic buckets, native schema %v", name, hg.GetSampleCount(), len(hg.GetBucket()), hg.Schema)
		}
	}
	if m, ok := testkit.Series(t, h.reg, "rolter_key_cooldown", map[string]string{"provider": "good", "state": "closed"}); !ok || m.GetGauge().GetValue() != 1 {
		t.Errorf("rolter_key_cooldown for a closed key: %v", m)
	}
}

// seriesCount is how many series reg has, and fails on any label value
// holding marker.
func seriesCount(t *testing.T, reg prometheus.Gatherer, marker string) int {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			n++
			for _, lp := range m.GetLabel() {
				if strings.Contains(lp.GetValue(), marker) {
					t.Fatalf("a client string became a label: %s=%q in %s", lp.GetName(), lp.GetValue(), mf.GetName())
				}
			}
		}
	}
	return n
}

// TestSeriesCountBounded: whatever a client sends (unknown models, models
// under a provider or group slug, garbage headers, pins, request ids), the
// series count does not grow with it: labels come from the configuration
// and fixed sets only.
func TestSeriesCountBounded(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","model":"echo","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	})
	p := h.provider("open", up.base(), store.ProviderSettings{}, "sk-x") // no catalog: any model is forwarded
	must(t, h.db.CreateGroup(context.Background(), &store.Group{OrgID: h.org.ID, Slug: "grp", Name: "grp",
		Members: []store.GroupMember{{ProviderID: p, Weight: 1}}}))
	h.route("r", "", store.Target{ProviderID: p, UpstreamModel: "m", Weight: 1})
	send := func(i int) {
		g := fmt.Sprintf("garbage-%d", i)
		for _, c := range []struct {
			body string
			hdr  []string
			want int
		}{
			{`{"model":"` + g + `","messages":[]}`, nil, 404},
			{`{"model":"open/` + g + `","messages":[]}`, nil, 200},
			{`{"model":"grp/` + g + `","messages":[]}`, nil, 200},
			{`{"model":"r","messages":[]}`, []string{"X-Rolter-Provider", g}, 400},
			{`{"model":"r","messages":[]}`, []string{"X-Request-Id", g, "X-Garbage-" + g, g}, 200},
			{`{"model":` + fmt.Sprint(i) + `}`, nil, 400},
		} {
			resp := h.post("/v1/chat/completions", c.body, c.hdr...)
			if body := readAll(t, resp); resp.StatusCode != c.want {
				t.Fatalf("%s: status %d, want %d: %s", c.body, resp.StatusCode, c.want, body)
			}
		}
	}
	send(0)
	before := seriesCount(t, h.reg, "garbage-")
	for i := 1; i <= 50; i++ {
		send(i)
	}
	if after := seriesCount(t, h.reg, "garbage-"); after != before {
		t.Fatalf("series grew from %d to %d with client strings", before, after)
	}
}

// TestSeriesOfDeletedEntitiesRemoved: deleting a route and a provider
// removes their series; the others stay.
func TestSeriesOfDeletedEntitiesRemoved(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	})
	keep := h.provider("keep", up.base(), store.ProviderSettings{}, "sk-x")
	gone := h.provider("gone", up.base(), store.ProviderSettings{}, "sk-y")
	h.route("stay", "", store.Target{ProviderID: keep, UpstreamModel: "m", Weight: 1})
	h.route("leave", "", store.Target{ProviderID: gone, UpstreamModel: "m", Weight: 1})
	for _, m := range []string{"stay", "leave"} {
		resp := h.post("/v1/chat/completions", `{"model":"`+m+`","messages":[]}`)
		if body := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", m, resp.StatusCode, body)
		}
	}
	has := func(labels map[string]string) bool {
		for _, name := range []string{"rolter_requests_total", "rolter_prompt_tokens_total", "rolter_upstream_attempts_total",
			"rolter_upstream_ttfb_seconds", "rolter_request_duration_seconds"} {
			if _, ok := testkit.Series(t, h.reg, name, labels); ok {
				return true
			}
		}
		return false
	}
	if !has(map[string]string{"route": "leave"}) || !has(map[string]string{"provider": "gone"}) {
		t.Fatal("no series for the route and provider before the deletion")
	}
	ctx := context.Background()
	must(t, h.db.DeleteRoute(ctx, routeID(t, h, "leave")))
	must(t, h.db.SoftDeleteProvider(ctx, gone, time.Now()))
	h.reload()
	if has(map[string]string{"route": "leave"}) || has(map[string]string{"provider": "gone"}) {
		t.Fatal("a deleted route's or provider's series remain")
	}
	if !has(map[string]string{"route": "stay", "provider": "keep"}) {
		t.Fatal("the surviving route's series went too")
	}
}

func routeID(t *testing.T, h *harness, model string) int64 {
	t.Helper()
	for _, pj := range h.snap.Current().Org("default").Projects.All() {
		if r := pj.Routes.At(model); r != nil {
			return r.ID
		}
	}
	t.Fatalf("no route %q", model)
	return 0
}

// TestIdleProviderHasOnlyItsGauges (issue 21): a provider that never
// served a request has its rolter_provider_ready and rolter_key_cooldown
// series, computed at scrape time, and no request, attempt or upstream
// latency series, nor metric children held for it; its first attempt
// makes them.
func TestIdleProviderHasOnlyItsGauges(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	})
	p := h.provider("idle", up.base(), store.ProviderSettings{}, "sk-x")
	h.route("r", "", store.Target{ProviderID: p, UpstreamModel: "m", Weight: 1})
	labels := map[string]string{"org": "default", "provider": "idle"}
	perRequest := []string{"rolter_requests_total", "rolter_prompt_tokens_total", "rolter_upstream_attempts_total",
		"rolter_upstream_ttfb_seconds", "rolter_upstream_duration_seconds"}
	for _, name := range perRequest {
		if _, ok := testkit.Series(t, h.reg, name, labels); ok {
			t.Errorf("%s has a series for a provider that never served", name)
		}
	}
	for _, name := range []string{"rolter_provider_ready", "rolter_key_cooldown"} {
		if _, ok := testkit.Series(t, h.reg, name, labels); !ok {
			t.Errorf("no %s series before any request", name)
		}
	}
	rt := h.gw.table.Load().providers.At(p)
	if rt.obs.Load() != nil {
		t.Fatal("metric children made for a provider that never served")
	}
	resp := h.post("/v1/chat/completions", `{"model":"r","messages":[]}`)
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if rt.obs.Load() == nil {
		t.Fatal("no metric children after the provider served")
	}
	for _, name := range perRequest {
		if _, ok := testkit.Series(t, h.reg, name, labels); !ok {
			t.Errorf("no %s series after a request", name)
		}
	}
}
