package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// engine imitates an inference server's metadata endpoints (vLLM's shapes,
// or llama.cpp's with props) and records what it is asked to generate.
type engine struct {
	*upstream
	mu      sync.Mutex
	models  []string // served model ids
	context int
	alias   string // llama.cpp /props model_alias; "" = none
	kind    string
}

func newEngine(t *testing.T, kind string, context int, models ...string) *engine {
	e := &engine{models: models, context: context, kind: kind}
	e.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		e.mu.Lock()
		defer e.mu.Unlock()
		switch r.URL.Path {
		case "/health":
			if e.kind == "llamacpp" {
				_, _ = io.WriteString(w, `{"status":"ok"}`)
			}
		case "/v1/models":
			var cards []string
			for _, m := range e.models {
				if e.kind == "llamacpp" {
					cards = append(cards, fmt.Sprintf(`{"id":%q,"aliases":[],"tags":[],"object":"model","created":1,"owned_by":"llamacpp","meta":{"vocab_type":2,"n_vocab":151936,"n_ctx":%d,"n_ctx_train":40960,"n_embd":4096,"n_params":8190735360,"size":5026981888}}`, m, e.context))
				} else {
					cards = append(cards, fmt.Sprintf(`{"id":%q,"object":"model","created":1,"owned_by":"vllm","root":%q,"parent":null,"max_model_len":%d,"permission":[]}`, m, m, e.context))
				}
			}
			_, _ = io.WriteString(w, `{"object":"list","data":[`+strings.Join(cards, ",")+`]}`)
		case "/props":
			fmt.Fprintf(w, `{"default_generation_settings":{"n_ctx":%d},"total_slots":4,"model_alias":%q,"model_ftype":"Q4_K - Medium","model_path":"/models/Qwen3-8B-Q4_K_M.gguf","modalities":{"vision":false,"audio":false},"build_info":"b6000-abc123"}`, e.context, e.alias)
		default:
			var req struct {
				Model string `json:"model"`
			}
			_ = json.Unmarshal(body, &req)
			_, _ = io.WriteString(w, `{"model":"`+req.Model+`","choices":[]}`)
		}
	})
	return e
}

func (e *engine) serve(context int, models ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.models, e.context = models, context
}

func (h *harness) upstreamProvider(slug, base string) int64 {
	p := &store.Provider{OrgID: h.org.ID, Slug: slug, Name: slug, Kind: "vllm", BaseURL: base, MetadataSource: "upstream"}
	if strings.HasPrefix(slug, "llama") {
		p.Kind = "llamacpp"
	}
	must(h.t, h.db.CreateProvider(context.Background(), p))
	h.reload()
	return p.ID
}

func (h *harness) models() map[string]modelEntry {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+h.key)
	resp, err := http.DefaultClient.Do(req)
	must(h.t, err)
	var out struct {
		Data []modelEntry `json:"data"`
	}
	must(h.t, json.Unmarshal([]byte(readAll(h.t, resp)), &out))
	m := map[string]modelEntry{}
	for _, e := range out.Data {
		m[e.ID] = e
	}
	return m
}

func TestReplaceAtUnchangedEndpoint(t *testing.T) {
	h := newProbedHarness(t, Config{})
	e := newEngine(t, "vllm", 8192, "A")
	pid := h.upstreamProvider("box", e.base())
	h.route("chat", "", store.Target{ProviderID: pid, Weight: 1})
	// Before the first probe the provider is not routable: fail closed.
	if st, _, _, body := h.call("chat"); st != 503 || !strings.Contains(body, `"code":"metadata_unavailable"`) {
		t.Fatalf("before any probe: %d %s", st, body)
	}
	h.probe()
	ms := h.models()
	if ms["chat"].ContextLength != 8192 || ms["box/A"].ContextLength != 8192 {
		t.Fatalf("models: %+v", ms)
	}
	big := `{"model":"chat","max_tokens":10000}`
	if resp := h.post("/v1/chat/completions", big); resp.StatusCode != 400 || !strings.Contains(readAll(t, resp), "context_length_exceeded") {
		t.Fatalf("10000 tokens on an 8192 context: %d", resp.StatusCode)
	}
	if st, _, um, _ := h.call("chat"); st != 200 || um != "A" {
		t.Fatalf("served %d by upstream model %q, want A", st, um)
	}
	// The box now serves B with a larger context: no admin edit, no restart.
	e.serve(32768, "B")
	h.probe()
	ms = h.models()
	if ms["chat"].ContextLength != 32768 || ms["box/B"].ContextLength != 32768 || ms["box/A"].ID != "" {
		t.Fatalf("models after the swap: %+v", ms)
	}
	resp := h.post("/v1/chat/completions", big)
	if readAll(t, resp); resp.StatusCode != 200 || resp.Header.Get("X-Rolter-Upstream-Model") != "B" {
		t.Fatalf("after the swap: %d %q", resp.StatusCode, resp.Header.Get("X-Rolter-Upstream-Model"))
	}
	if body, _ := e.last(); !strings.Contains(body, `"model":"B"`) {
		t.Fatalf("upstream got %s", body)
	}
}

func TestAmbiguousMetadataFailsClosed(t *testing.T) {
	h := newProbedHarness(t, Config{})
	e := newEngine(t, "vllm", 8192, "A")
	pid := h.upstreamProvider("box", e.base())
	h.route("chat", "", store.Target{ProviderID: pid, Weight: 1})
	h.probe()
	e.serve(8192, "A", "A-lora")
	h.probe()
	st, _, _, body := h.call("chat")
	if st != 503 || !strings.Contains(body, `"code":"metadata_unavailable"`) || !strings.Contains(body, "metadata_unusable") || strings.Contains(body, "2 models") {
		t.Fatalf("two models: %d %s", st, body)
	}
	if _, ok := h.models()["chat"]; ok {
		t.Fatal("a route with no routable target is listed")
	}
	e.serve(8192, "A")
	h.probe()
	if st, _, _, _ := h.call("chat"); st != 200 {
		t.Fatalf("after recovery: %d", st)
	}
}

func TestLlamaCppAliasMismatchIsNotReady(t *testing.T) {
	h := newProbedHarness(t, Config{})
	e := newEngine(t, "llamacpp", 16384, "qwen3-8b")
	e.alias = "qwen3-8b"
	pid := h.upstreamProvider("llama", e.base())
	h.route("chat", "", store.Target{ProviderID: pid, Weight: 1})
	h.probe()
	if st, _, um, _ := h.call("chat"); st != 200 || um != "qwen3-8b" {
		t.Fatalf("matching alias: %d %q", st, um)
	}
	if h.models()["llama/qwen3-8b"].ContextLength != 16384 {
		t.Fatalf("llama.cpp context from /props: %+v", h.models())
	}
	e.mu.Lock()
	e.alias = "something-else"
	e.mu.Unlock()
	h.probe()
	if st, _, _, body := h.call("chat"); st != 503 || !strings.Contains(body, "metadata_unavailable") {
		t.Fatalf("alias mismatch: %d %s", st, body)
	}
}

// Design 003: llama.cpp supplies quantization through /props, and the
// discovery projection (/v1/models) shows it on the provider's address.
func TestLlamaCppQuantizationInModels(t *testing.T) {
	h := newProbedHarness(t, Config{})
	e := newEngine(t, "llamacpp", 16384, "qwen3-8b")
	pid := h.upstreamProvider("llama", e.base())
	h.route("chat", "", store.Target{ProviderID: pid, Weight: 1})
	h.probe()
	ms := h.models()
	if got := ms["llama/qwen3-8b"].Quantization; got != "Q4_K_M" {
		t.Fatalf("llama/qwen3-8b quantization %q, want Q4_K_M: %+v", got, ms)
	}
	// A route may pool several serves: it names no quantization.
	if got := ms["chat"].Quantization; got != "" {
		t.Fatalf("route chat quantization %q, want none", got)
	}
}

func TestPoolAdvertisesItsSmallestContext(t *testing.T) {
	h := newProbedHarness(t, Config{})
	small, large := newEngine(t, "vllm", 40960, "qwen3"), newEngine(t, "vllm", 131072, "qwen3")
	a := h.upstreamProvider("small", small.base())
	b := h.upstreamProvider("large", large.base())
	h.route("qwen3", "", store.Target{ProviderID: a, Weight: 1}, store.Target{ProviderID: b, Weight: 1})
	h.group("pool", "", store.GroupMember{ProviderID: a, Weight: 1}, store.GroupMember{ProviderID: b, Weight: 1})
	h.probe()
	ms := h.models()
	if ms["qwen3"].ContextLength != 40960 || ms["pool/qwen3"].ContextLength != 40960 || ms["large/qwen3"].ContextLength != 131072 {
		t.Fatalf("advertised contexts: %+v", ms)
	}
	const big = 50000
	for _, m := range []string{"qwen3", "pool/qwen3"} {
		resp := h.post("/v1/chat/completions", fmt.Sprintf(`{"model":%q,"max_tokens":%d}`, m, big))
		if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "context_length_exceeded") {
			t.Fatalf("%s with %d output tokens: %d %s", m, big, resp.StatusCode, body)
		}
	}
	resp := h.post("/v1/chat/completions", fmt.Sprintf(`{"model":"large/qwen3","max_tokens":%d}`, big))
	if readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("on the 128k provider's own address: %d", resp.StatusCode)
	}
}

func TestConfiguredProvidersUnchangedUnderProbes(t *testing.T) {
	h := newProbedHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.URL.Path == "/health" {
			return
		}
		_, _ = io.WriteString(w, vllmChatResponse)
	})
	pid := h.provider("vllm", up.base(), store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: pid, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1})
	const req = `{"model":"qwen3","messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`
	for round := range 2 { // before any probe (optimistic) and after one
		resp := h.post("/v1/chat/completions", req)
		got := readAll(t, resp)
		if want := strings.Replace(vllmChatResponse, `"model":"Qwen/Qwen3-8B"`, `"model":"qwen3"`, 1); resp.StatusCode != 200 || got != want {
			t.Fatalf("round %d: %d %s", round, resp.StatusCode, got)
		}
		if body, _ := up.last(); body != strings.Replace(req, `"qwen3"`, `"Qwen/Qwen3-8B"`, 1) {
			t.Fatalf("round %d: upstream body %s", round, body)
		}
		h.probe()
	}
}

func TestRoutePolicy(t *testing.T) {
	h := newHarness(t, Config{})
	release := make(chan struct{})
	var inFlight atomic.Int64
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"slow"`) {
			inFlight.Add(1)
			<-release
		}
		_, _ = io.WriteString(w, `{"model":"x"}`)
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	ctx := context.Background()
	must(t, h.db.CreateRoute(ctx, &store.Route{ProjectID: h.proj.ID, Model: "strict", Strategy: "weighted",
		Policy:  store.Policy{MaxOutputTokens: 256, Tools: "deny", Media: "deny", MaxConcurrency: 2},
		Targets: []store.Target{{ProviderID: pid, Weight: 1}}}))
	h.reload()

	// Clamp: a larger request is sent with the ceiling; a request without
	// one gets it as the default. Nothing else changes.
	readAll(t, h.post("/v1/chat/completions", `{"model":"strict","max_tokens":4096,"messages":[]}`))
	if body, _ := up.last(); body != `{"model":"strict","max_tokens":256,"messages":[]}` {
		t.Fatalf("clamped body: %s", body)
	}
	readAll(t, h.post("/v1/chat/completions", `{"model":"strict","messages":[]}`))
	if body, _ := up.last(); !strings.Contains(body, `"max_tokens":256`) {
		t.Fatalf("defaulted body: %s", body)
	}
	for name, req := range map[string]string{
		"tools_denied": `{"model":"strict","messages":[],"tools":[{"type":"function","function":{"name":"f"}}]}`,
		"media_denied": `{"model":"strict","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]}`,
	} {
		n := up.count()
		resp := h.post("/v1/chat/completions", req)
		if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, `"code":"`+name+`"`) || up.count() != n {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	// max_concurrency 2: with two requests held upstream, more get 429.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			readAll(t, h.post("/v1/chat/completions", `{"model":"strict","messages":[],"user":"slow"}`))
		}()
	}
	for inFlight.Load() < 2 {
		runtimeGosched()
	}
	var limited atomic.Int64
	var wg2 sync.WaitGroup
	for range 8 {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			resp := h.post("/v1/chat/completions", `{"model":"strict","messages":[]}`)
			body := readAll(t, resp)
			if resp.StatusCode == 429 && strings.Contains(body, "concurrency_limited") && resp.Header.Get("Retry-After") == "1" {
				limited.Add(1)
			}
		}()
	}
	// The limit covers embeddings on the route too.
	resp := h.post("/v1/embeddings", `{"model":"strict","input":"hi"}`)
	if body := readAll(t, resp); resp.StatusCode != 429 {
		t.Fatalf("embeddings over max_concurrency: %d %s", resp.StatusCode, body)
	}
	wg2.Wait()
	close(release)
	wg.Wait()
	if limited.Load() != 8 {
		t.Fatalf("%d of 8 requests over max_concurrency got 429", limited.Load())
	}
	if st, _, _, _ := h.call("strict"); st != 200 {
		t.Fatalf("after the slots freed: %d", st)
	}
}

// TestLimiterKeepsInFlightAcrossMaxChange: a changed max_concurrency
// applies to the same limiter, so requests in flight still count.
func TestLimiterKeepsInFlightAcrossMaxChange(t *testing.T) {
	g := &Gateway{}
	r := &snapshot.Route{Route: store.Route{ID: 7, Policy: store.Policy{MaxConcurrency: 2}}}
	l := g.limiter(r)
	if !l.Acquire() || !l.Acquire() {
		t.Fatal("two slots of two")
	}
	r.Policy.MaxConcurrency = 3
	l2 := g.limiter(r)
	if l2 != l || l2.InFlight() != 2 {
		t.Fatalf("a max change lost the in-flight count: %d", l2.InFlight())
	}
	if !l2.Acquire() || l2.Acquire() {
		t.Fatal("the new max of 3 is not enforced over the 2 in flight")
	}
	r.Policy.MaxConcurrency = 0
	if g.limiter(r) != nil {
		t.Fatal("an unlimited route has a limiter")
	}
}
