package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// answerChat answers a chat completion naming model, with usage.
func answerChat(model string) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","model":"` + model + `","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
	}
}

func answer500(w http.ResponseWriter, _ *http.Request, _ []byte) {
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = w.Write([]byte(`{"error":"boom"}`))
}

// createRoute writes a route straight to the store (the admin checks have
// their own tests) and reloads the snapshot.
func (h *harness) createRoute(r store.Route) {
	h.t.Helper()
	r.ProjectID = h.proj.ID
	if r.Strategy == "" {
		r.Strategy = "weighted"
	}
	must(h.t, h.db.CreateRoute(context.Background(), &r))
	h.reload()
}

// sentModel is the model the upstream's last request named.
func sentModel(t *testing.T, u *upstream) string {
	t.Helper()
	body, _ := u.last()
	var v struct{ Model string }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("upstream body %q: %v", body, err)
	}
	return v.Model
}

// lastUsage waits for the request's usage record (account runs after the
// response is written).
func (h *harness) lastUsage(n int) store.UsageRecord {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.usage.all()) < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d usage records, want %d", len(h.usage.all()), n)
		}
		runtimeGosched()
	}
	recs := h.usage.all()
	return recs[n-1]
}

func modelOf(t *testing.T, body string) string {
	t.Helper()
	var v struct{ Model string }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("response %q: %v", body, err)
	}
	return v.Model
}

const fallbackChat = `{"model":"%s","messages":[{"role":"user","content":"hello"}]}`

func chat(model string) string { return strings.Replace(fallbackChat, "%s", model, 1) }

// Issue 19, priority tiers: the preferred tier serves while it is up;
// while it fails, the next tier serves; once its breaker opens it is not
// contacted at all; after the cooldown one request probes it, and traffic
// returns to it. The clock is the harness's manual one.
func TestTierPreferredDownThenBack(t *testing.T) {
	h := newHarness(t, Config{})
	var down atomic.Bool
	pref := newUpstream(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		if down.Load() {
			answer500(w, r, b)
			return
		}
		answerChat("local")(w, r, b)
	})
	backup := newUpstream(t, answerChat("cloud"))
	pp := h.provider("vllm", pref.base(), store.ProviderSettings{})
	pb := h.provider("openai", backup.base(), store.ProviderSettings{})
	h.createRoute(store.Route{Model: "chat", Targets: []store.Target{
		{ProviderID: pb, Weight: 100, Priority: 1}, // a far larger weight, yet only a fallback tier
		{ProviderID: pp, Weight: 1},
	}})
	n := 0
	send := func(wantTier int) {
		t.Helper()
		resp := h.post("/v1/chat/completions", chat("chat"))
		body := readAll(t, resp)
		n++
		if resp.StatusCode != 200 || modelOf(t, body) != "chat" {
			t.Fatalf("request %d: %d %s", n, resp.StatusCode, body)
		}
		if rec := h.lastUsage(n); rec.Tier != wantTier || rec.Fallback != "" {
			t.Fatalf("request %d: usage tier %d fallback %q, want tier %d", n, rec.Tier, rec.Fallback, wantTier)
		}
	}
	for range 5 {
		send(0)
	}
	if pref.count() != 5 || backup.count() != 0 {
		t.Fatalf("healthy preferred tier: preferred %d, backup %d requests", pref.count(), backup.count())
	}
	down.Store(true)
	for range 3 { // each tries the preferred tier once, then the next tier serves
		send(1)
	}
	if pref.count() != 8 || backup.count() != 3 {
		t.Fatalf("failing preferred tier: preferred %d, backup %d", pref.count(), backup.count())
	}
	for range 5 { // the breaker is open: the preferred tier is not contacted
		send(1)
	}
	if pref.count() != 8 || backup.count() != 8 {
		t.Fatalf("cooling preferred tier: preferred %d, backup %d", pref.count(), backup.count())
	}
	down.Store(false)
	h.clock.Advance(6 * time.Second) // past the first 5 s cooldown
	send(0)                          // the half-open probe
	for range 4 {
		send(0)
	}
	if pref.count() != 13 || backup.count() != 8 {
		t.Fatalf("recovered preferred tier: preferred %d, backup %d", pref.count(), backup.count())
	}
	if v := counterValue(t, h.reg, "rolter_route_served_total", map[string]string{"route": "chat", "tier": "1", "fallback": ""}); v != 8 {
		t.Fatalf("rolter_route_served_total tier 1 = %v, want 8", v)
	}
	if v := counterValue(t, h.reg, "rolter_route_served_total", map[string]string{"route": "chat", "tier": "0", "fallback": ""}); v != 10 {
		t.Fatalf("rolter_route_served_total tier 0 = %v, want 10", v)
	}
}

// Attempts are counted per tier: a tier of many failing targets spends
// its attempts, then the next tier still gets its turn.
func TestTierAttemptsSpentMoveOn(t *testing.T) {
	h := newHarness(t, Config{MaxAttempts: 2})
	bad := newUpstream(t, answer500)
	good := newUpstream(t, answerChat("cloud"))
	var targets []store.Target
	for _, s := range []string{"b1", "b2", "b3", "b4"} {
		targets = append(targets, store.Target{ProviderID: h.provider(s, bad.base(), store.ProviderSettings{}), Weight: 1})
	}
	targets = append(targets, store.Target{ProviderID: h.provider("good", good.base(), store.ProviderSettings{}), Weight: 1, Priority: 5})
	h.createRoute(store.Route{Model: "chat", Targets: targets})
	resp := h.post("/v1/chat/completions", chat("chat"))
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if bad.count() != 2 || good.count() != 1 {
		t.Fatalf("tier 0 got %d attempts (want MaxAttempts 2), tier 5 got %d", bad.count(), good.count())
	}
	if rec := h.lastUsage(1); rec.Tier != 5 || rec.Attempts != 3 {
		t.Fatalf("usage: tier %d attempts %d", rec.Tier, rec.Attempts)
	}
}

// Panic mode applies within the last tier only: a cooling preferred tier
// is not forced while a worse tier can serve; when the last tier is all
// cooling too, its earliest cooldown is tried.
func TestTierPanicOnlyInLastTier(t *testing.T) {
	h := newHarness(t, Config{MaxAttempts: 1})
	var backupDown atomic.Bool
	pref := newUpstream(t, answer500)
	backup := newUpstream(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		if backupDown.Load() {
			answer500(w, r, b)
			return
		}
		answerChat("cloud")(w, r, b)
	})
	pp := h.provider("vllm", pref.base(), store.ProviderSettings{})
	pb := h.provider("openai", backup.base(), store.ProviderSettings{})
	h.createRoute(store.Route{Model: "chat", Targets: []store.Target{{ProviderID: pp, Weight: 1}, {ProviderID: pb, Weight: 1, Priority: 1}}})
	for range 3 {
		readAll(t, h.post("/v1/chat/completions", chat("chat")))
	}
	if pref.count() != 3 {
		t.Fatalf("preferred got %d", pref.count())
	}
	backupDown.Store(true)
	for range 3 { // the preferred tier cools: only the last tier is tried
		resp := h.post("/v1/chat/completions", chat("chat"))
		readAll(t, resp)
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if pref.count() != 3 || backup.count() != 6 {
		t.Fatalf("preferred %d, backup %d", pref.count(), backup.count())
	}
	// Both cool now: panic mode tries the last tier, never the cooling
	// preferred one.
	readAll(t, h.post("/v1/chat/completions", chat("chat")))
	if pref.count() != 3 || backup.count() != 7 {
		t.Fatalf("panic: preferred %d, backup %d", pref.count(), backup.count())
	}
}

// Issue 19, fallback routes: a route whose every target 5xx's is served
// by its fallback route, which applies its own model rewrite; the
// response keeps the caller's address in model, x-rolter-fallback names
// the route, and the usage record names both. The key may use the
// original address only.
func TestFallbackRouteServes(t *testing.T) {
	h := newHarness(t, Config{})
	h.key = h.newKey([]string{"primary"}, nil)
	bad := newUpstream(t, answer500)
	good := newUpstream(t, answerChat("gpt-4o-2024"))
	pbad := h.provider("vllm", bad.base(), store.ProviderSettings{})
	pgood := h.provider("openai", good.base(), store.ProviderSettings{})
	h.createRoute(store.Route{Model: "secondary", Targets: []store.Target{{ProviderID: pgood, UpstreamModel: "gpt-4o", Weight: 1}}})
	h.createRoute(store.Route{Model: "primary", Fallbacks: []string{"secondary"},
		Targets: []store.Target{{ProviderID: pbad, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1}}})

	resp := h.post("/v1/chat/completions", chat("primary"))
	body := readAll(t, resp)
	if resp.StatusCode != 200 || modelOf(t, body) != "primary" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Rolter-Fallback"); got != "secondary" {
		t.Fatalf("x-rolter-fallback %q", got)
	}
	if bad.count() != 1 || good.count() != 1 || sentModel(t, good) != "gpt-4o" {
		t.Fatalf("bad %d, good %d, sent %q", bad.count(), good.count(), sentModel(t, good))
	}
	rec := h.lastUsage(1)
	if rec.Route != "primary" || rec.Fallback != "secondary" || rec.ProviderSlug != "openai" || rec.Attempts != 2 || rec.Status != 200 {
		t.Fatalf("usage %+v", rec)
	}

	// Streamed: every chunk keeps the caller's address too.
	good2 := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		sseHeader(w)
		sseWrite(w, `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-2024","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n",
			"data: [DONE]\n\n")
	})
	pg2 := h.provider("openai-2", good2.base(), store.ProviderSettings{})
	h.createRoute(store.Route{Model: "secondary-2", Targets: []store.Target{{ProviderID: pg2, Weight: 1}}})
	h.createRoute(store.Route{Model: "primary-2", Fallbacks: []string{"secondary-2"}, Targets: []store.Target{{ProviderID: pbad, Weight: 1}}})
	h.key = h.newKey([]string{"primary-2"}, nil)
	resp = h.post("/v1/chat/completions", `{"model":"primary-2","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if resp.Header.Get("X-Rolter-Fallback") != "secondary-2" || len(events) == 0 ||
		!strings.Contains(events[0], `"model":"primary-2"`) || sentModel(t, good2) != "secondary-2" {
		t.Fatalf("stream: header %q, events %q, sent %q", resp.Header.Get("X-Rolter-Fallback"), events, sentModel(t, good2))
	}
}

// A fallback chain is followed depth first, and a cycle written to the
// store behind the admin API's back (which refuses it) still ends.
func TestFallbackChainAndCycleEnds(t *testing.T) {
	h := newHarness(t, Config{MaxAttempts: 1})
	bad := newUpstream(t, answer500)
	good := newUpstream(t, answerChat("x"))
	pbad := h.provider("vllm", bad.base(), store.ProviderSettings{})
	pgood := h.provider("openai", good.base(), store.ProviderSettings{})
	h.createRoute(store.Route{Model: "c", Targets: []store.Target{{ProviderID: pgood, Weight: 1}}})
	h.createRoute(store.Route{Model: "b", Fallbacks: []string{"a"}, Targets: []store.Target{{ProviderID: pbad, UpstreamModel: "m-b", Weight: 1}}})
	h.createRoute(store.Route{Model: "a", Fallbacks: []string{"b", "c"}, Targets: []store.Target{{ProviderID: pbad, UpstreamModel: "m-a", Weight: 1}}})
	resp := h.post("/v1/chat/completions", chat("a"))
	body := readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Rolter-Fallback") != "c" || modelOf(t, body) != "a" {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), body)
	}
	if bad.count() != 2 || good.count() != 1 {
		t.Fatalf("bad %d (a, b), good %d", bad.count(), good.count())
	}
	resp = h.post("/v1/chat/completions", chat("b")) // b -> a -> (b seen) -> c
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Rolter-Fallback") != "c" {
		t.Fatalf("b: %d %q", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"))
	}
}

// Issue 19, context fallback: a request too long for the route's pool
// context is admitted against its context fallback's pool and served
// there; without one it is the 400.
func TestContextFallbackServesOverflow(t *testing.T) {
	h := newHarness(t, Config{})
	small := newUpstream(t, answerChat("small-model"))
	big := newUpstream(t, answerChat("big-model"))
	ps := h.provider("vllm", small.base(), store.ProviderSettings{})
	pb := h.provider("openai", big.base(), store.ProviderSettings{})
	h.createRoute(store.Route{Model: "long", Targets: []store.Target{{ProviderID: pb, UpstreamModel: "big-model", Weight: 1, ContextLimit: 128000}}})
	h.createRoute(store.Route{Model: "short", ContextFallback: "long",
		Targets: []store.Target{{ProviderID: ps, UpstreamModel: "small-model", Weight: 1, ContextLimit: 1000}}})
	h.createRoute(store.Route{Model: "short-only", Targets: []store.Target{{ProviderID: ps, UpstreamModel: "small-model", Weight: 1, ContextLimit: 1000}}})
	long := `{"model":"%s","max_tokens":4000,"messages":[{"role":"user","content":"hello"}]}`

	resp := h.post("/v1/chat/completions", strings.Replace(long, "%s", "short", 1))
	body := readAll(t, resp)
	if resp.StatusCode != 200 || modelOf(t, body) != "short" || resp.Header.Get("X-Rolter-Fallback") != "long" {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), body)
	}
	if small.count() != 0 || big.count() != 1 || sentModel(t, big) != "big-model" {
		t.Fatalf("small %d, big %d", small.count(), big.count())
	}
	if rec := h.lastUsage(1); rec.Route != "short" || rec.Fallback != "long" {
		t.Fatalf("usage %+v", rec)
	}
	// A request that fits stays on the route.
	resp = h.post("/v1/chat/completions", chat("short"))
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Rolter-Fallback") != "" || small.count() != 1 {
		t.Fatalf("fitting request: %d %q, small %d", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), small.count())
	}
	resp = h.post("/v1/chat/completions", strings.Replace(long, "%s", "short-only", 1))
	body = readAll(t, resp)
	if resp.StatusCode != 400 || !strings.Contains(body, "context_length_exceeded") {
		t.Fatalf("without a context fallback: %d %s", resp.StatusCode, body)
	}
}

// Issue 19, where fallbacks never apply: a pinned provider-slug/model
// address, an x-rolter-provider pin, the caller's own error (an upstream
// 400, a policy refusal), and a stream whose first byte reached the
// client.
func TestFallbackNeverApplies(t *testing.T) {
	h := newHarness(t, Config{})
	var mode atomic.Value
	mode.Store("500")
	bad := newUpstream(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		switch mode.Load() {
		case "400":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"error":{"message":"bad temperature","code":"invalid_value"}}`))
		case "break":
			sseHeader(w)
			sseWrite(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"h"}}]}`+"\n\n")
			panic(http.ErrAbortHandler) // the connection breaks mid-stream
		default:
			answer500(w, r, b)
		}
	})
	good := newUpstream(t, answerChat("x"))
	pbad := h.provider("vllm", bad.base(), store.ProviderSettings{})
	pgood := h.provider("openai", good.base(), store.ProviderSettings{})
	h.createRoute(store.Route{Model: "secondary", Targets: []store.Target{{ProviderID: pgood, Weight: 1}}})
	h.createRoute(store.Route{Model: "primary", Fallbacks: []string{"secondary"}, Policy: store.Policy{Tools: "deny"},
		Targets: []store.Target{{ProviderID: pbad, Weight: 1}}})
	check := func(what string, resp *http.Response, status int) {
		t.Helper()
		body := readAll(t, resp)
		if resp.StatusCode != status || resp.Header.Get("X-Rolter-Fallback") != "" || good.count() != 0 {
			t.Fatalf("%s: %d %q (good %d) %s", what, resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), good.count(), body)
		}
	}
	check("pinned provider address", h.post("/v1/chat/completions", chat("vllm/primary")), http.StatusBadGateway)
	check("x-rolter-provider", h.post("/v1/chat/completions", chat("primary"), "X-Rolter-Provider", "vllm"), http.StatusBadGateway)
	check("policy refusal", h.post("/v1/chat/completions",
		`{"model":"primary","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]}`), 400)
	h.clock.Advance(10 * time.Minute) // the breaker the 5xx's opened has closed
	mode.Store("400")
	check("upstream 400", h.post("/v1/chat/completions", chat("primary")), 400)
	mode.Store("break")
	resp := h.post("/v1/chat/completions", `{"model":"primary","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if good.count() != 0 || resp.Header.Get("X-Rolter-Fallback") != "" || len(events) < 2 || !strings.Contains(events[len(events)-1], "upstream_stream_error") {
		t.Fatalf("broken stream: good %d, events %q", good.count(), events)
	}
}

// posts counts the requests u received with a body: completions, not
// readiness probes.
func posts(u *upstream) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, b := range u.bodies {
		if b != "" {
			n++
		}
	}
	return n
}

// "vLLM first, OpenAI only when it's down": a route whose only provider
// is not ready (its health probe fails) is served by its fallback route,
// without an attempt on the route; once the provider is ready again the
// route serves itself.
func TestFallbackWhenRouteNotReady(t *testing.T) {
	h := newProbedHarness(t, Config{})
	var down atomic.Bool
	local := newUpstream(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if r.Method == http.MethodGet { // health and metadata probes
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
			return
		}
		answerChat("local")(w, r, b)
	})
	cloud := newUpstream(t, answerChat("gpt-4o"))
	pl := h.provider("vllm", local.base(), store.ProviderSettings{})
	pc := h.provider("openai", cloud.base(), store.ProviderSettings{})
	h.createRoute(store.Route{Model: "cloud", Targets: []store.Target{{ProviderID: pc, UpstreamModel: "gpt-4o", Weight: 1}}})
	h.createRoute(store.Route{Model: "chat", Fallbacks: []string{"cloud"}, Targets: []store.Target{{ProviderID: pl, Weight: 1}}})
	h.probe()
	resp := h.post("/v1/chat/completions", chat("chat"))
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Rolter-Fallback") != "" || posts(cloud) != 0 {
		t.Fatalf("ready route: %d %q, cloud %d", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), posts(cloud))
	}
	down.Store(true)
	h.probe()
	before := posts(local)
	resp = h.post("/v1/chat/completions", chat("chat"))
	body := readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Rolter-Fallback") != "cloud" || modelOf(t, body) != "chat" || posts(local) != before {
		t.Fatalf("route not ready: %d %q %s (local got %d requests)", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), body, posts(local)-before)
	}
	if rec := h.lastUsage(2); rec.Fallback != "cloud" || rec.Attempts != 1 || rec.Route != "chat" {
		t.Fatalf("usage %+v", rec)
	}
	down.Store(false)
	h.probe()
	resp = h.post("/v1/chat/completions", chat("chat"))
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Rolter-Fallback") != "" || posts(cloud) != 1 {
		t.Fatalf("ready again: %d %q, cloud %d", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), posts(cloud))
	}
}

// A pool whose context rolter does not know: the upstream's own 400 for a
// too-long prompt sends the request to the context fallback; any other
// 400 is relayed unchanged, as is the overflow on a route without one.
func TestContextFallbackOnUpstreamOverflow(t *testing.T) {
	h := newHarness(t, Config{})
	const overflow = `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 9000 tokens.","type":"BadRequestError","param":null,"code":400}`
	const other = `{"error":{"message":"temperature must be at most 2","code":"invalid_value"}}`
	var answer atomic.Value
	answer.Store(overflow)
	small := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(answer.Load().(string)))
	})
	big := newUpstream(t, answerChat("big-model"))
	ps := h.provider("vllm", small.base(), store.ProviderSettings{})
	pb := h.provider("openai", big.base(), store.ProviderSettings{})
	h.createRoute(store.Route{Model: "long", Targets: []store.Target{{ProviderID: pb, UpstreamModel: "big-model", Weight: 1}}})
	h.createRoute(store.Route{Model: "short", ContextFallback: "long", Targets: []store.Target{{ProviderID: ps, Weight: 1}}})
	h.createRoute(store.Route{Model: "short-only", Targets: []store.Target{{ProviderID: ps, Weight: 1}}})

	resp := h.post("/v1/chat/completions", chat("short"))
	body := readAll(t, resp)
	if resp.StatusCode != 200 || modelOf(t, body) != "short" || resp.Header.Get("X-Rolter-Fallback") != "long" || posts(big) != 1 {
		t.Fatalf("overflow: %d %q %s", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), body)
	}
	if rec := h.lastUsage(1); rec.Fallback != "long" || rec.Status != 200 || rec.Attempts != 2 {
		t.Fatalf("usage %+v", rec)
	}
	resp = h.post("/v1/chat/completions", chat("short-only"))
	if body := readAll(t, resp); resp.StatusCode != 400 || body != overflow {
		t.Fatalf("without a context fallback: %d %s", resp.StatusCode, body)
	}
	answer.Store(other)
	resp = h.post("/v1/chat/completions", chat("short"))
	if body := readAll(t, resp); resp.StatusCode != 400 || body != other || resp.Header.Get("X-Rolter-Fallback") != "" || posts(big) != 1 {
		t.Fatalf("another 400: %d %q %s", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), body)
	}
}

// A fallback is resolved by name in the table serving the request: after
// the fallback route's targets are replaced (a patched table, its plan
// derived anew), the caller's route falls back through its new target,
// and a fallback route created after the caller's is reached too.
func TestFallbackFollowsPatchedRoute(t *testing.T) {
	h := newHarness(t, Config{MaxAttempts: 1})
	h.key = h.newKey([]string{"primary"}, nil)
	bad := newUpstream(t, answer500)
	old := newUpstream(t, answer500)
	fresh := newUpstream(t, answerChat("fresh-model"))
	pbad := h.provider("vllm", bad.base(), store.ProviderSettings{})
	pold := h.provider("old", old.base(), store.ProviderSettings{})
	pfresh := h.provider("fresh", fresh.base(), store.ProviderSettings{})
	// primary names "late" before it exists: only a lookup by name at
	// request time reaches it once it does.
	h.createRoute(store.Route{Model: "secondary", Targets: []store.Target{{ProviderID: pold, UpstreamModel: "old-model", Weight: 1}}})
	h.createRoute(store.Route{Model: "primary", Fallbacks: []string{"secondary", "late"},
		Targets: []store.Target{{ProviderID: pbad, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1}}})

	resp := h.post("/v1/chat/completions", chat("primary"))
	readAll(t, resp)
	if resp.StatusCode == 200 || old.count() != 1 || fresh.count() != 0 {
		t.Fatalf("before: %d, old %d, fresh %d", resp.StatusCode, old.count(), fresh.count())
	}

	// secondary's targets replaced: the table is patched, primary's plan
	// is shared with the previous table and secondary's derived anew.
	ctx := context.Background()
	before := h.gw.table.Load()
	sec := before.snap.Org(h.org.Name).Projects.At(h.proj.Name).Routes.At("secondary").Route
	sec.Targets = []store.Target{{ProviderID: pfresh, UpstreamModel: "fresh-model", Weight: 1}}
	must(t, h.db.UpdateRoute(ctx, &sec))
	h.reload()
	after := h.gw.table.Load()
	if after.snap.DiffFrom(before.snap) == nil {
		t.Fatal("the table was rebuilt, not patched: the test needs a patch")
	}
	resp = h.post("/v1/chat/completions", chat("primary"))
	body := readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Rolter-Fallback") != "secondary" || modelOf(t, body) != "primary" {
		t.Fatalf("after: %d %q %s", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), body)
	}
	if old.count() != 1 || fresh.count() != 1 || sentModel(t, fresh) != "fresh-model" {
		t.Fatalf("old %d, fresh %d, sent %q", old.count(), fresh.count(), sentModel(t, fresh))
	}

	// secondary failing again: the route created after primary serves.
	sec.Targets = []store.Target{{ProviderID: pold, UpstreamModel: "old-model", Weight: 1}}
	must(t, h.db.UpdateRoute(ctx, &sec))
	h.reload()
	h.createRoute(store.Route{Model: "late", Targets: []store.Target{{ProviderID: pfresh, UpstreamModel: "late-model", Weight: 1}}})
	resp = h.post("/v1/chat/completions", chat("primary"))
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Rolter-Fallback") != "late" || sentModel(t, fresh) != "late-model" {
		t.Fatalf("late: %d %q, sent %q", resp.StatusCode, resp.Header.Get("X-Rolter-Fallback"), sentModel(t, fresh))
	}
}
