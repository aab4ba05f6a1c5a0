package gateway

// Issue 13's hardening scenarios that live in the data path (numbered 21-36
// in docs/reliability.md). Each test is named after its scenario.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rolter/rolter/internal/cooldown"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
)

// heapAfterGC is the live heap once garbage is collected.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// countingUsage counts usage records and keeps their longest strings.
type countingUsage struct {
	n                       int
	maxAddress, maxUpstream int
}

func (c *countingUsage) Record(r store.UsageRecord) {
	c.n++
	c.maxAddress = max(c.maxAddress, len(r.Address))
	c.maxUpstream = max(c.maxUpstream, len(r.UpstreamModel))
}

// TestScenario21_ClientChosenModelNames: a key holder naming a fresh model
// per request cannot grow the gateway's memory beyond its bounded
// deployment state, a model over the cap is refused before anything is keyed
// by it, and state nobody uses expires.
func TestScenario21_ClientChosenModelNames(t *testing.T) {
	h := newHarness(t, Config{})
	// The upstream fails (502) and names a huge model in its 200s: neither
	// may grow state, headers or usage beyond the cap.
	huge := strings.Repeat("u", 1<<20)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"ok-`) {
			_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"`+huge+`","choices":[]}`)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	})
	h.provider("p", up.base(), store.ProviderSettings{})
	var sink countingUsage
	h.gw.usage = &sink // single client goroutine: no lock needed

	t.Run("over the cap", func(t *testing.T) {
		before, records := h.gw.nstates.Load(), sink.n
		for _, n := range []int{257, 1 << 20} {
			model := "p/" + strings.Repeat("m", n-2)
			resp := h.post("/v1/chat/completions", `{"model":"`+model+`","messages":[]}`)
			body := readAll(t, resp)
			if resp.StatusCode != 400 || !strings.Contains(body, `"code":"invalid_model"`) {
				t.Fatalf("%d-byte model: status %d body %.200s", n, resp.StatusCode, body)
			}
			if len(body) > 1024 {
				t.Fatalf("the error repeats the model: %d bytes", len(body))
			}
		}
		if h.gw.nstates.Load() != before || up.count() != 0 {
			t.Fatalf("a refused model created state (%d -> %d) or reached the upstream (%d)", before, h.gw.nstates.Load(), up.count())
		}
		if sink.n != records {
			t.Fatalf("a refused model left %d usage records", sink.n-records)
		}
		if n := counterValue(t, h.reg, "rolter_requests_total", map[string]string{"status": "400"}); n != 0 {
			t.Fatalf("a refused model was counted in metrics: %v", n)
		}
	})

	t.Run("upstream model capped", func(t *testing.T) {
		resp := h.post("/v1/chat/completions", `{"model":"p/ok-1","messages":[]}`)
		readAll(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if n := len(resp.Header.Get("X-Rolter-Upstream-Model")); n == 0 || n > MaxModelLen {
			t.Fatalf("x-rolter-upstream-model is %d bytes", n)
		}
		if sink.maxUpstream > MaxModelLen {
			t.Fatalf("usage upstream_model is %d bytes", sink.maxUpstream)
		}
	})

	t.Run("1000 unique 255-byte names", func(t *testing.T) {
		const n = 1000
		// Warm the client's and server's connection buffers first.
		readAll(t, h.post("/v1/chat/completions", `{"model":"p/warm","messages":[]}`))
		states0, bytes0 := h.gw.nstates.Load(), h.gw.stateBytes.Load()
		heap0 := heapAfterGC()
		for i := range n {
			model := fmt.Sprintf("p/%0253d", i)
			if len(model) != 255 {
				t.Fatalf("model is %d bytes", len(model))
			}
			resp := h.post("/v1/chat/completions", `{"model":"`+model+`","messages":[]}`)
			readAll(t, resp)
			if resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("request %d: status %d", i, resp.StatusCode)
			}
		}
		heap1 := heapAfterGC()
		states := h.gw.nstates.Load() - states0
		stateBytes := h.gw.stateBytes.Load() - bytes0
		growth := int64(heap1) - int64(heap0)
		beyond := growth - stateBytes
		t.Logf("%d requests: heap after GC grew %d KiB; %d remembered deployments account for %d KiB; %d KiB beyond the bounded state",
			n, growth>>10, states, stateBytes>>10, beyond>>10)
		if states != n {
			t.Fatalf("%d deployments remembered, want %d", states, n)
		}
		if beyond > 2<<20 {
			t.Fatalf("the heap grew %d KiB beyond the bounded state", beyond>>10)
		}
		if sink.maxAddress > MaxModelLen || sink.maxUpstream > MaxModelLen {
			t.Fatalf("usage strings of %d and %d bytes", sink.maxAddress, sink.maxUpstream)
		}

		// Nobody names them again: after the TTL they are forgotten at the
		// next new deployment, and the bytes with them.
		h.clock.Advance(stateTTL + time.Minute)
		readAll(t, h.post("/v1/chat/completions", `{"model":"p/after-ttl","messages":[]}`))
		if got := h.gw.nstates.Load(); got > 2 {
			t.Fatalf("%d deployments remembered after the TTL, want at most 2", got)
		}
		if got := h.gw.stateBytes.Load(); got > 2*stateCost(targetID{model: strings.Repeat("m", 256)}) {
			t.Fatalf("%d state bytes after the TTL", got)
		}
	})
}

// TestScenario21_StateBoundedInBytes: past the byte budget a new
// client-named deployment first makes room by forgetting idle client-named
// ones; if none is idle it gets fresh, unremembered state. Route targets
// are always remembered and never expire.
func TestScenario21_StateBoundedInBytes(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("r", "", store.Target{ProviderID: pid, UpstreamModel: "routed", Weight: 1})
	readAll(t, h.post("/v1/chat/completions", `{"model":"r","messages":[]}`)) // builds its plan and state
	routed := targetID{pid, "routed"}
	for i := range 10 {
		h.gw.state(targetID{pid, fmt.Sprint("named-", i)}, false)
	}
	// As if an attacker had filled the budget with names just used.
	h.gw.stateBytes.Add(maxStateBytes - h.gw.stateBytes.Load())
	h.clock.Advance(2 * time.Second) // past the sweep's once-a-second limit
	n := h.gw.nstates.Load()
	st := h.gw.state(targetID{pid, "new"}, false)
	if h.gw.nstates.Load() != n || st == h.gw.state(targetID{pid, "new"}, false) {
		t.Fatal("a deployment was remembered past the byte budget while nothing was idle")
	}
	// A route created while the budget is full is remembered all the same
	// (from its first request: plans are built then, lazyplan.go).
	h.route("r2", "", store.Target{ProviderID: pid, UpstreamModel: "routed-2", Weight: 1})
	readAll(t, h.post("/v1/chat/completions", `{"model":"r2","messages":[]}`))
	if _, ok := h.gw.states.Load(targetID{pid, "routed-2"}); !ok {
		t.Fatal("a route target was not remembered while the budget was full")
	}
	// Once the named ones are idle for a minute, a new name makes room.
	h.clock.Advance(stateBusyTTL + time.Second)
	st = h.gw.state(targetID{pid, "after"}, false)
	if st != h.gw.state(targetID{pid, "after"}, false) {
		t.Fatal("no room was made by forgetting idle client-named deployments")
	}
	if _, ok := h.gw.states.Load(targetID{pid, "named-0"}); ok {
		t.Fatal("an idle client-named deployment was kept while the budget was full")
	}
	h.clock.Advance(10 * stateTTL)
	h.gw.state(targetID{pid, "trigger"}, false)
	for _, id := range []targetID{routed, {pid, "routed-2"}} {
		if _, ok := h.gw.states.Load(id); !ok {
			t.Fatalf("routed deployment %v expired", id)
		}
	}
}

// TestScenario22_DeclaredBodyLengthIsNotAllocated: ten connections that
// declare a 32 MiB body and send one byte hold next to no memory, and each
// gets 408 and a closed connection once the body timeout passes.
func TestScenario22_DeclaredBodyLengthIsNotAllocated(t *testing.T) {
	// The body timeout leaves a loaded machine time to get all ten
	// connections into the handler before the first one times out.
	const conns, bodyTimeout = 10, 3 * time.Second
	h := newHarness(t, Config{BodyTimeout: bodyTimeout})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	// A key whose allowlist refuses the model: the body is read first.
	refused := h.newKey([]string{"other"}, nil)
	heap0 := heapAfterGC()
	var cs []net.Conn
	start := time.Now()
	for i := range conns {
		c, err := net.Dial("tcp", h.srv.Listener.Addr().String())
		must(t, err)
		t.Cleanup(func() { c.Close() })
		key := h.key
		if i%2 == 1 {
			key = refused
		}
		_, err = fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", key, 32<<20)
		must(t, err)
		cs = append(cs, c)
	}
	testkit.Eventually(t, "all ten requests in the handler", func() bool {
		return inFlight(h.gw) == conns
	})
	growth := int64(heapAfterGC()) - int64(heap0)
	t.Logf("%d connections each declaring 32 MiB: heap after GC grew %d KiB", conns, growth>>10)
	if growth > 10<<20 {
		t.Fatalf("the heap grew %d MiB", growth>>20)
	}
	var slowest time.Duration
	for i, c := range cs {
		must(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("conn %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"code":"body_timeout"`) {
			t.Fatalf("conn %d: status %d body %s", i, resp.StatusCode, body)
		}
		// The server closes the connection: the next read is EOF.
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("conn %d is still open after the 408 (%d, %v)", i, n, err)
		}
		slowest = max(slowest, time.Since(start))
	}
	t.Logf("every connection closed %v after it started (body timeout %v)", slowest.Round(time.Millisecond), bodyTimeout)
	// The bound is the "timeout plus 1 s" with room for a loaded
	// 2-core machine; without the timeout the connections never close.
	if slowest > bodyTimeout+5*time.Second {
		t.Fatalf("connections closed after %v", slowest)
	}
	if up.count() != 0 {
		t.Fatalf("the upstream was called %d times", up.count())
	}
}

// inFlight reads the gateway's in-flight gauge.
func inFlight(g *Gateway) float64 {
	var m dto.Metric
	_ = g.metrics.inFlight.Write(&m)
	return m.GetGauge().GetValue()
}

// TestScenario28_ProbeFailureTextStaysOut: a data-path client learns which
// provider is not ready and the class of the reason, never the upstream's
// error text (which may hold a password or an internal address).
func TestScenario28_ProbeFailureTextStaysOut(t *testing.T) {
	h := newProbedHarness(t, Config{})
	const leak = "postgres://rolter:hunter2@db.internal:5432 via resolver 10.0.0.53"
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, leak)
	})
	pid := h.upstreamProvider("box", up.base())
	h.route("chat", "", store.Target{ProviderID: pid, Weight: 1})
	h.probe()
	st, ok := h.probes.Status(pid)
	if !ok || st.Ready || !strings.Contains(st.Reason+st.LastError, "hunter2") && !strings.Contains(st.Reason, "500") {
		t.Fatalf("the readiness view lost the details: %+v", st)
	}
	for _, model := range []string{"chat", "box/anything"} {
		resp := h.post("/v1/chat/completions", `{"model":"`+model+`","messages":[]}`)
		body := readAll(t, resp)
		if resp.StatusCode != 503 || !strings.Contains(body, `"code":"metadata_unavailable"`) ||
			!strings.Contains(body, `\"box\"`) || !strings.Contains(body, string(st.Class)) {
			t.Fatalf("%s: status %d body %s", model, resp.StatusCode, body)
		}
		for _, secret := range []string{"hunter2", "10.0.0.53", "db.internal", "postgres://"} {
			if strings.Contains(body, secret) {
				t.Fatalf("%s: the client sees %q: %s", model, secret, body)
			}
		}
	}
}

// TestScenario33_BearerSchemeIsCaseInsensitive: RFC 7235 auth schemes are
// case-insensitive, so "bearer" and "BEARER" work like "Bearer".
func TestScenario33_BearerSchemeIsCaseInsensitive(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		req, _ := http.NewRequest("POST", h.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
		req.Header.Set("Authorization", scheme+" "+h.key)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		if body := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d body %s", scheme, resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest("POST", h.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
	req.Header.Set("Authorization", "Basic "+h.key)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	if readAll(t, resp); resp.StatusCode != 401 {
		t.Fatalf("Basic: status %d", resp.StatusCode)
	}
}

// TestScenario34_ModelOfTheWrongType: a model that is not a string is
// named as such, not as a body that is not JSON.
func TestScenario34_ModelOfTheWrongType(t *testing.T) {
	h := newHarness(t, Config{})
	for _, v := range []string{`1`, `null`, `{"a":1}`, `["m"]`, `true`} {
		resp := h.post("/v1/chat/completions", `{"model": `+v+`, "messages":[]}`)
		body := readAll(t, resp)
		if resp.StatusCode != 400 || !strings.Contains(body, `"message":"model must be a string"`) {
			t.Fatalf("model %s: status %d body %s", v, resp.StatusCode, body)
		}
	}
}

// TestScenario31_HeadersForwardedUpstream: only allowlisted client headers
// reach the upstream, the body always goes as JSON, a request id is passed
// through or made up and echoed, and the upstream's Server and Set-Cookie
// stay behind.
func TestScenario31_HeadersForwardedUpstream(t *testing.T) {
	h := newHarness(t, Config{})
	var got []http.Header
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		got = append(got, r.Header.Clone())
		w.Header().Set("Server", "internal-vllm/0.9 (gpu-7.corp)")
		w.Header().Set("Set-Cookie", "session=upstream")
		w.Header().Set("X-Request-Id", "upstream-own-id")
		w.Header().Set("Openai-Organization", "org-operator-secret-id")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "4999")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[]}`)
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{}, "sk-pool")
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	ant := &store.Provider{OrgID: h.org.ID, Slug: "claude", Name: "claude", Kind: "anthropic", BaseURL: up.base(), MetadataSource: "configured"}
	must(t, h.db.CreateProvider(t.Context(), ant))
	h.reload()

	send := func(path, model string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest("POST", h.srv.URL+path, strings.NewReader(`{"model":"`+model+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+h.key)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		readAll(t, resp)
		return resp
	}
	hostile := map[string]string{
		"OpenAI-Organization": "org-attacker", "OpenAI-Project": "proj-attacker", "X-Custom": "1",
		"Cookie": "a=b", "Content-Type": "application/x-www-form-urlencoded", "OpenAI-Beta": "assistants=v2",
		"Anthropic-Version": "2023-06-01", "Anthropic-Beta": "tools-2024", "Accept": "application/json",
		"X-Forwarded-For": "1.2.3.4", "User-Agent": "curl/8",
	}
	resp := send("/v1/chat/completions", "m", hostile)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	up0 := got[len(got)-1]
	for _, k := range []string{"OpenAI-Organization", "OpenAI-Project", "X-Custom", "Cookie", "Anthropic-Version", "Anthropic-Beta", "X-Forwarded-For"} {
		if v := up0.Get(k); v != "" {
			t.Errorf("the upstream received %s: %q", k, v)
		}
	}
	if ct := up0.Get("Content-Type"); ct != "application/json" {
		t.Errorf("upstream Content-Type %q", ct)
	}
	if up0.Get("OpenAI-Beta") != "assistants=v2" || up0.Get("Accept") != "application/json" || up0.Get("Authorization") != "Bearer sk-pool" {
		t.Errorf("allowlisted headers missing upstream: %v", up0)
	}
	id := resp.Header.Get("X-Request-Id")
	if id == "" || id == "upstream-own-id" || up0.Get("X-Request-Id") != id {
		t.Errorf("request id: client %q, upstream %q", id, up0.Get("X-Request-Id"))
	}
	if resp.Header.Get("Openai-Organization") != "" || resp.Header.Get("X-Ratelimit-Remaining-Requests") == "4999" {
		t.Errorf("the operator's upstream account headers reached the client: %v", resp.Header)
	}
	if resp.Header.Get("Server") != "" || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("upstream headers reached the client: Server %q Set-Cookie %q", resp.Header.Get("Server"), resp.Header.Get("Set-Cookie"))
	}

	// No Content-Type at all (curl -d without -H): still JSON upstream.
	send("/v1/chat/completions", "m", nil)
	if ct := got[len(got)-1].Get("Content-Type"); ct != "application/json" {
		t.Errorf("no client Content-Type: upstream got %q", ct)
	}

	// The client's request id passes through when sane, and is replaced
	// when not.
	resp = send("/v1/chat/completions", "m", map[string]string{"X-Request-Id": "trace-42"})
	if resp.Header.Get("X-Request-Id") != "trace-42" || got[len(got)-1].Get("X-Request-Id") != "trace-42" {
		t.Errorf("client request id not passed through: %q", resp.Header.Get("X-Request-Id"))
	}
	resp = send("/v1/chat/completions", "m", map[string]string{"X-Request-Id": strings.Repeat("x", 200)})
	if id := resp.Header.Get("X-Request-Id"); len(id) > 128 || id == "" {
		t.Errorf("an oversized request id was echoed: %d bytes", len(id))
	}

	// Anthropic kinds get the anthropic headers and not OpenAI's.
	send("/v1/messages", "claude/claude-x", hostile)
	a := got[len(got)-1]
	if a.Get("Anthropic-Version") != "2023-06-01" || a.Get("Anthropic-Beta") != "tools-2024" || a.Get("OpenAI-Beta") != "" || a.Get("OpenAI-Organization") != "" {
		t.Errorf("anthropic upstream headers: %v", a)
	}
}

// TestScenario25_RefusedPoolKey: an upstream 401/403 on a pool key is the
// operator's credential failing, not the caller's: that key cools for the
// credential cooldown, the request fails over to another key, the failure
// is counted per provider, and when every key is refused the client gets
// 502 upstream_auth_failed, never the upstream's 401.
func TestScenario25_RefusedPoolKey(t *testing.T) {
	h := newHarness(t, Config{CredentialCooldown: 10 * time.Minute})
	var mu sync.Mutex
	bad := map[string]bool{"Bearer sk-revoked": true, "Bearer sk-also-revoked": true}
	calls := map[string]int{}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		auth := r.Header.Get("Authorization")
		mu.Lock()
		calls[auth]++
		refused := bad[auth]
		mu.Unlock()
		if refused {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided: sk-revo****","code":"invalid_api_key"}}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[]}`)
	})
	// The revoked key is all but certain to be picked first (weight 1000
	// to 1), so the first request meets the 401.
	pool := &store.Provider{OrgID: h.org.ID, Slug: "pool", Name: "pool", Kind: "vllm", BaseURL: up.base(), MetadataSource: "configured",
		Keys: []store.ProviderKey{{Secret: secret.New("sk-revoked"), Weight: 1000}, {Secret: secret.New("sk-good"), Weight: 1}}}
	must(t, h.db.CreateProvider(t.Context(), pool))
	h.reload()
	pid := pool.ID
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	for i := range 100 {
		resp := h.post("/v1/chat/completions", `{"model":"m","messages":[]}`)
		if body := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d body %s", i, resp.StatusCode, body)
		}
	}
	mu.Lock()
	revokedCalls := calls["Bearer sk-revoked"]
	mu.Unlock()
	if revokedCalls != 1 {
		t.Fatalf("the refused key was sent %d times; want once, then cooled", revokedCalls)
	}
	if n := counterValue(t, h.reg, "rolter_upstream_credential_failures_total", map[string]string{"provider": "pool"}); n != float64(revokedCalls) {
		t.Fatalf("credential failures counted %v, want %d", n, revokedCalls)
	}
	if st := h.gw.table.Load().providers.At(pid); st.keys[0].breaker.State() != cooldown.StateCooling ||
		st.keys[1].breaker.State() != cooldown.StateClosed {
		t.Fatalf("after a 401 the keys are %s and %s; want the refused one cooling", st.keys[0].breaker.State(), st.keys[1].breaker.State())
	}
	// The target itself stays healthy: other keys serve it.
	for _, tg := range allPlans(h.gw.table.Load()) {
		for _, x := range tg.targets {
			if x.breaker.State() != cooldown.StateClosed {
				t.Fatalf("the target was penalised: %s", x.breaker.State())
			}
		}
	}

	// Every key refused: 502 upstream_auth_failed, not the upstream's 401.
	pid2 := h.provider("deadpool", up.base(), store.ProviderSettings{}, "sk-also-revoked")
	h.route("m2", "", store.Target{ProviderID: pid2, Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"m2","messages":[]}`)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `"code":"upstream_auth_failed"`) ||
		strings.Contains(body, "Incorrect API key") || strings.Contains(body, "invalid_api_key") {
		t.Fatalf("every key refused: status %d body %s", resp.StatusCode, body)
	}

	// Editing the key's secret ends its cooldown at once.
	_, err := h.db.SQL().ExecContext(t.Context(), `UPDATE provider_keys SET secret = 'plain:sk-fixed' WHERE provider_id = `+strconv.FormatInt(pid2, 10))
	must(t, err)
	h.reload()
	resp = h.post("/v1/chat/completions", `{"model":"m2","messages":[]}`)
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("after the key was edited: status %d body %s", resp.StatusCode, body)
	}
	h.clock.Advance(time.Minute) // unedited keys stay out well past the failure cooldown
	mu.Lock()
	before := calls["Bearer sk-revoked"]
	mu.Unlock()
	for range 20 {
		readAll(t, h.post("/v1/chat/completions", `{"model":"m","messages":[]}`))
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["Bearer sk-revoked"] != before {
		t.Fatal("the refused key was used again within its credential cooldown")
	}
}

// TestScenario24_SlowClientIsNotTheUpstreamsFault: three streams whose
// clients stop reading outlast the idle timeout; the idle watchdog measures
// only the upstream, so it does not fire. The client write timeout cuts each
// off as client_slow (499), no breaker is penalised, and other callers are
// served.
func TestScenario24_SlowClientIsNotTheUpstreamsFault(t *testing.T) {
	// Idle 1 s: the upstream below writes without pause, so only a
	// scheduler stall of a whole second could trip it legitimately.
	const idle, writeTimeout = time.Second, 3 * time.Second
	h := newHarness(t, Config{IdleTimeout: idle, ClientWriteTimeout: writeTimeout})
	chunk := `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"` +
		strings.Repeat("a", 16<<10) + `"}}]}` + "\n\n"
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if !strings.Contains(string(body), `"stream":true`) {
			_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[]}`)
			return
		}
		sseHeader(w)
		for r.Context().Err() == nil { // as fast as the gateway reads
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})

	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", h.srv.Listener.Addr().String())
		must(t, err)
		t.Cleanup(func() { c.Close() })
		body := `{"model":"m","stream":true,"messages":[]}`
		_, err = fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", h.key, len(body), body)
		must(t, err)
		conns = append(conns, c) // and never read
	}
	slow := func() int {
		n := 0
		for _, r := range h.usage.all() {
			if r.Class == string(ClassClientSlow) && r.Status == 499 {
				n++
			}
		}
		return n
	}
	testkit.Eventually(t, "three client_slow records", func() bool { return slow() == 3 })
	// Before the fix the watchdog fired during the blocked writes: each
	// stream then ended as idle_timeout against the upstream.
	for _, r := range h.usage.all() {
		if r.Class == string(ClassIdleTimeout) {
			t.Fatalf("a stream was blamed on the upstream: %+v", r)
		}
	}
	for _, tg := range allPlans(h.gw.table.Load()) {
		for _, x := range tg.targets {
			if st := x.breaker.State(); st != cooldown.StateClosed {
				t.Fatalf("the upstream's breaker is %s after slow clients", st)
			}
		}
	}
	if n := counterValue(t, h.reg, "rolter_upstream_attempts_total", map[string]string{"provider": "p", "class": "client_slow"}); n != 3 {
		t.Fatalf("client_slow attempts counted %v", n)
	}
	for i := range 5 {
		resp := h.post("/v1/chat/completions", `{"model":"m","messages":[]}`)
		if body := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("another caller %d: status %d body %s", i, resp.StatusCode, body)
		}
	}
}

// slowWriter takes delay over every write, like a client on a slow link.
type slowWriter struct {
	http.ResponseWriter
	delay time.Duration
}

func (s slowWriter) Write(b []byte) (int, error) {
	time.Sleep(s.delay) // the client's pace, not a wait for a condition
	return s.ResponseWriter.Write(b)
}

func (s slowWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// TestScenario24_SlowWritesDoNotCountAsUpstreamSilence: a client whose
// every write takes longer than the idle timeout (but less than the client
// write timeout) gets the whole stream: time spent writing to it is not
// counted as upstream silence.
func TestScenario24_SlowWritesDoNotCountAsUpstreamSilence(t *testing.T) {
	const idle = time.Second
	h := newHarness(t, Config{IdleTimeout: idle, ClientWriteTimeout: time.Minute})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		sseHeader(w)
		for i := range 2 {
			// A healthy upstream: an event every idle/4.
			time.Sleep(idle / 4)
			sseWrite(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"`+strconv.Itoa(i)+`"}}]}`+"\n\n")
		}
		sseWrite(w, "data: [DONE]\n\n")
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.gw.ServeHTTP(slowWriter{w, idle * 3 / 2}, r)
	}))
	t.Cleanup(front.Close)
	req, _ := http.NewRequest("POST", front.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+h.key)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	body := readAll(t, resp)
	if !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Contains(body, "upstream_timeout") {
		t.Fatalf("the slow client's stream was cut: %s", body)
	}
	recs := h.usage.all()
	if r := recs[len(recs)-1]; r.Class != "" || r.Status != 200 {
		t.Fatalf("usage %+v", r)
	}
}

// TestScenario25_ForbiddenIsNotKeyWide: a 403 concerns a key and a request
// together (a model the key may not use), and on provider addresses the
// client picks the model: it fails over to another key but never cools the
// key for everyone, so no caller can take a pool out by naming a
// forbidden model.
func TestScenario25_ForbiddenIsNotKeyWide(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), "restricted") {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":{"message":"project proj_secret does not have access to model restricted"}}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[]}`)
	})
	pid := h.provider("pool", up.base(), store.ProviderSettings{}, "sk-a", "sk-b")
	for i := range 10 {
		resp := h.post("/v1/chat/completions", `{"model":"pool/restricted","messages":[]}`)
		body := readAll(t, resp)
		// 502 upstream_auth_failed every time (both keys tried): the
		// caller's choice of model never cools a key or the deployment.
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `"code":"upstream_auth_failed"`) || strings.Contains(body, "proj_secret") {
			t.Fatalf("forbidden model, request %d: status %d body %s", i, resp.StatusCode, body)
		}
	}
	for _, k := range h.gw.table.Load().providers.At(pid).keys {
		if st := k.breaker.State(); st != cooldown.StateClosed {
			t.Fatalf("a 403 cooled a pool key: %s", st)
		}
	}
	if st := h.gw.state(targetID{pid, "restricted"}, false).breaker.State(); st != cooldown.StateClosed {
		t.Fatalf("a 403 cooled the deployment: %s", st)
	}
	for i := range 20 {
		resp := h.post("/v1/chat/completions", `{"model":"pool/open","messages":[]}`)
		if body := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("another model after the 403s, request %d: %d %s", i, resp.StatusCode, body)
		}
	}
}

// TestScenario22_BodyBytesInFlightAreBounded: connections that really send
// large bodies hold memory until their requests end; all of them together
// hold at most MaxBodyInFlight, beyond which a request gets 503 overloaded.
// What is held is given back when requests end.
func TestScenario22_BodyBytesInFlightAreBounded(t *testing.T) {
	const mib = 1 << 20
	h := newHarness(t, Config{MaxBody: 2 * mib, MaxBodyInFlight: 3*mib + mib/2})
	release := make(chan struct{})
	var inside sync.WaitGroup
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		inside.Done()
		<-release
		_, _ = io.WriteString(w, `{}`)
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	body := `{"model":"m","x":"` + strings.Repeat("a", mib) + `"}`
	inside.Add(3)
	statuses := make(chan int, 3)
	for range 3 {
		go func() {
			resp := h.post("/v1/chat/completions", body)
			readAll(t, resp)
			statuses <- resp.StatusCode
		}()
	}
	inside.Wait() // three bodies held, about 3 MiB
	t.Logf("three requests in flight hold %d KiB of body bytes", h.gw.bodyBytes.Load()>>10)
	resp := h.post("/v1/chat/completions", body)
	got := readAll(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(got, `"code":"overloaded"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a fourth 1 MiB body past the 3.5 MiB budget: status %d body %s", resp.StatusCode, got)
	}
	close(release)
	for range 3 {
		if st := <-statuses; st != 200 {
			t.Fatalf("a request within the budget: status %d", st)
		}
	}
	testkit.Eventually(t, "the body bytes to be given back", func() bool { return h.gw.bodyBytes.Load() == 0 })
	inside.Add(1)
	if resp := h.post("/v1/chat/completions", body); readAll(t, resp) == "" || resp.StatusCode != 200 {
		t.Fatalf("after the others ended: status %d", resp.StatusCode)
	}
}

// TestStreamPastFirstEventGivesBodyBytesBack: a stream whose first event
// came has dropped its request body, and no longer counts it against
// MaxBodyInFlight while it goes on.
func TestStreamPastFirstEventGivesBodyBytesBack(t *testing.T) {
	const mib = 1 << 20
	h := newHarness(t, Config{MaxBody: 2 * mib, MaxBodyInFlight: 3*mib + mib/2})
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		sseHeader(w)
		sseWrite(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
		select {
		case <-release:
		case <-r.Context().Done():
		}
		sseWrite(w, "data: [DONE]\n\n")
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	body := `{"model":"m","stream":true,"x":"` + strings.Repeat("a", mib) + `"}`
	var resps []*http.Response
	for range 3 {
		resp := h.post("/v1/chat/completions", body) // answers at the first event
		if resp.StatusCode != 200 {
			t.Fatalf("a stream: status %d", resp.StatusCode)
		}
		resps = append(resps, resp)
	}
	testkit.Eventually(t, "the streams' body bytes to be given back", func() bool { return h.gw.bodyBytes.Load() == 0 })
	close(release)
	for _, resp := range resps {
		if got := readAll(t, resp); !strings.Contains(got, "[DONE]") {
			t.Errorf("a stream did not end: %q", got)
		}
	}
	testkit.Eventually(t, "nothing counted once the streams ended", func() bool { return h.gw.bodyBytes.Load() == 0 })
}
