package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

const (
	withTools = `"tools":[{"type":"function","function":{"name":"f"}}]`
	withImage = `"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]`
)

// policyProvider registers a provider with its own policy.
func (h *harness) policyProvider(slug, base string, p store.Policy) int64 {
	return h.provider(slug, base, store.ProviderSettings{Policy: p})
}

func (h *harness) policyRoute(model string, p store.Policy, targets ...store.Target) {
	must(h.t, h.db.CreateRoute(context.Background(), &store.Route{ProjectID: h.proj.ID, Model: model, Strategy: "weighted",
		Policy: p, Targets: targets}))
	h.reload()
}

// chat posts a chat request for model with extra top-level members.
func (h *harness) chat(model, extra string) (int, string) {
	h.t.Helper()
	body := `{"model":"` + model + `"`
	if extra != "" {
		body += "," + extra
	}
	resp := h.post("/v1/chat/completions", body+"}")
	return resp.StatusCode, readAll(h.t, resp)
}

// Issue 14 §3: a request is governed by the strictest of its address's
// policy and its provider's, on every address kind. Route "strict" denies
// tools and so does its provider p: tools are refused as "strict", as
// "p/real" and as "group/real" through p, while a route over an allow-all
// provider serves them. A route with no policy of its own over p refuses
// them too, and no refused request reaches an upstream.
func TestPolicyOnEveryAddress(t *testing.T) {
	onEveryStore(t, func(t *testing.T, h *harness) {
		strictUp, openUp := newEcho(t, "p"), newEcho(t, "open")
		p := h.policyProvider("p", strictUp.base(), store.Policy{Tools: "deny"})
		open := h.policyProvider("open", openUp.base(), store.Policy{})
		h.policyRoute("strict", store.Policy{Tools: "deny"}, store.Target{ProviderID: p, UpstreamModel: "real", Weight: 1})
		h.policyRoute("loose", store.Policy{}, store.Target{ProviderID: p, UpstreamModel: "real", Weight: 1})
		h.policyRoute("free", store.Policy{}, store.Target{ProviderID: open, UpstreamModel: "real", Weight: 1})
		h.group("group", "weighted", store.GroupMember{ProviderID: p, Weight: 1})

		for _, model := range []string{"strict", "p/real", "group/real", "loose"} {
			st, body := h.chat(model, withTools)
			if st != 400 || !strings.Contains(body, `"code":"tools_denied"`) {
				t.Fatalf("%s with tools: %d %s", model, st, body)
			}
			// Without tools the same address serves.
			if st, body := h.chat(model, ""); st != 200 {
				t.Fatalf("%s without tools: %d %s", model, st, body)
			}
		}
		if n := strictUp.hits.Load(); n != 4 {
			t.Fatalf("p's upstream saw %d requests, want only the 4 without tools", n)
		}
		if st, body := h.chat("free", withTools); st != 200 || !strings.Contains(body, `"served_by":"open"`) {
			t.Fatalf("a route over an allow-all provider with tools: %d %s", st, body)
		}
		if st, body := h.chat("open/real", withTools); st != 200 {
			t.Fatalf("an allow-all provider address with tools: %d %s", st, body)
		}
		// x-rolter-provider narrows a route; it never sheds its policy.
		resp := h.post("/v1/chat/completions", `{"model":"strict",`+withTools+`}`, "X-Rolter-Provider", "p")
		if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "tools_denied") {
			t.Fatalf("pinned route with tools: %d %s", resp.StatusCode, body)
		}
	})
}

// Among candidate providers, the policy of the one picked applies: a
// request with tools skips a target whose provider denies them and is
// served by the other; when every candidate refuses, the first refusal is
// the answer.
func TestPolicyPerTarget(t *testing.T) {
	h := newHarness(t, Config{})
	denyUp, allowUp := newEcho(t, "deny"), newEcho(t, "allow")
	deny := h.policyProvider("deny", denyUp.base(), store.Policy{Tools: "deny"})
	allow := h.policyProvider("allow", allowUp.base(), store.Policy{})
	h.policyRoute("mixed", store.Policy{}, store.Target{ProviderID: deny, Weight: 1}, store.Target{ProviderID: allow, Weight: 1})
	for i := range 20 {
		if st, body := h.chat("mixed", withTools); st != 200 || !strings.Contains(body, `"served_by":"allow"`) {
			t.Fatalf("request %d with tools: %d %s", i, st, body)
		}
	}
	if denyUp.hits.Load() != 0 {
		t.Fatalf("the provider that denies tools was sent %d requests with tools", denyUp.hits.Load())
	}
	// Without tools both serve.
	for range 40 {
		if st, _ := h.chat("mixed", ""); st != 200 {
			t.Fatal(st)
		}
	}
	if denyUp.hits.Load() == 0 {
		t.Fatal("the tools-denying provider never served a plain request")
	}
	// Both refuse: the first target's refusal.
	h.group("media-off", "weighted", store.GroupMember{ProviderID: h.policyProvider("m1", denyUp.base(), store.Policy{Media: "deny"}), Weight: 1},
		store.GroupMember{ProviderID: h.policyProvider("m2", allowUp.base(), store.Policy{Media: "deny", Tools: "deny"}), Weight: 1})
	if st, body := h.chat("media-off/x", withImage); st != 400 || !strings.Contains(body, `"code":"media_denied"`) {
		t.Fatalf("every member refuses media: %d %s", st, body)
	}
	// A group's own policy governs too.
	must(t, h.db.CreateGroup(context.Background(), &store.Group{OrgID: h.org.ID, Slug: "g-strict", Name: "g", Strategy: "weighted",
		Policy: store.Policy{Media: "deny"}, Members: []store.GroupMember{{ProviderID: allow, Weight: 1}}}))
	h.reload()
	if st, body := h.chat("g-strict/x", withImage); st != 400 || !strings.Contains(body, "media_denied") {
		t.Fatalf("group policy media: %d %s", st, body)
	}
	if st, body := h.chat("allow/x", withImage); st != 200 {
		t.Fatalf("the same provider addressed directly allows media: %d %s", st, body)
	}
}

// max_output_tokens of a provider clamps and defaults on its own address
// and under a route, per target: each target is sent the body its own
// combined policy admits. A provider ceiling also counts in context
// admission.
func TestProviderOutputCeiling(t *testing.T) {
	h := newHarness(t, Config{})
	lowUp, highUp := newEcho(t, "low"), newEcho(t, "high")
	low := h.policyProvider("low", lowUp.base(), store.Policy{MaxOutputTokens: 100})
	high := h.policyProvider("high", highUp.base(), store.Policy{MaxOutputTokens: 1000})

	if st, body := h.chat("low/m", `"max_tokens":5000,"messages":[]`); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	if body, _ := lowUp.last(); body != `{"model":"m","max_tokens":100,"messages":[]}` {
		t.Fatalf("clamped on the provider address: %s", body)
	}
	h.chat("low/m", `"messages":[]`)
	if body, _ := lowUp.last(); !strings.Contains(body, `"max_tokens":100`) {
		t.Fatalf("defaulted on the provider address: %s", body)
	}
	// A route ceiling of 500 over both: low gets 100, high gets 500.
	h.policyRoute("both", store.Policy{MaxOutputTokens: 500}, store.Target{ProviderID: low, Weight: 1}, store.Target{ProviderID: high, Weight: 1})
	for range 30 {
		if st, body := h.chat("both", `"max_tokens":5000,"messages":[]`); st != 200 {
			t.Fatalf("%d %s", st, body)
		}
	}
	lowUp.mu.Lock()
	for _, b := range lowUp.bodies[2:] {
		if !strings.Contains(b, `"max_tokens":100,`) {
			t.Fatalf("low was sent %s", b)
		}
	}
	lowUp.mu.Unlock()
	highUp.mu.Lock()
	if len(highUp.bodies) == 0 {
		t.Fatal("high never served")
	}
	for _, b := range highUp.bodies {
		if !strings.Contains(b, `"max_tokens":500,`) {
			t.Fatalf("high was sent %s", b)
		}
	}
	highUp.mu.Unlock()
	// Refusal: with a 64-token context, a ceiling of 100 leaves no room.
	ctx := context.Background()
	pv := &store.Provider{OrgID: h.org.ID, Slug: "tiny", Name: "tiny", Kind: "vllm", BaseURL: lowUp.base(), MetadataSource: "configured",
		ContextLimit: 64, Settings: store.ProviderSettings{Policy: store.Policy{MaxOutputTokens: 100}}}
	must(t, h.db.CreateProvider(ctx, pv))
	h.reload()
	n := lowUp.count()
	if st, body := h.chat("tiny/m", `"messages":[{"role":"user","content":"hi"}]`); st != 400 || !strings.Contains(body, "context_length_exceeded") {
		t.Fatalf("ceiling over the context: %d %s", st, body)
	}
	if lowUp.count() != n {
		t.Fatal("a refused request reached the upstream")
	}
}

// A provider's max_concurrency counts its requests in flight on every
// address: its own, a route's, a group's. Over it a request gets 429
// concurrency_limited (or another target of its pool).
func TestProviderConcurrency(t *testing.T) {
	h := newHarness(t, Config{})
	release := make(chan struct{})
	var inFlight atomic.Int64
	slow := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"slow"`) {
			inFlight.Add(1)
			<-release
		}
		_, _ = io.WriteString(w, `{"model":"x","served_by":"slow"}`)
	})
	spare := newEcho(t, "spare")
	p := h.policyProvider("busy", slow.base(), store.Policy{MaxConcurrency: 1})
	s := h.policyProvider("spare", spare.base(), store.Policy{})
	h.policyRoute("r", store.Policy{}, store.Target{ProviderID: p, Weight: 1})
	h.policyRoute("pool", store.Policy{}, store.Target{ProviderID: p, Weight: 100}, store.Target{ProviderID: s, Weight: 1})
	h.group("grp", "weighted", store.GroupMember{ProviderID: p, Weight: 1})

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.chat("busy/m", `"user":"slow"`) }()
	for inFlight.Load() < 1 {
		runtimeGosched()
	}
	for _, model := range []string{"busy/m", "r", "grp/m"} {
		resp := h.post("/v1/chat/completions", `{"model":"`+model+`"}`)
		body := readAll(t, resp)
		if resp.StatusCode != 429 || !strings.Contains(body, "concurrency_limited") || !strings.Contains(body, `\"busy\"`) ||
			resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("%s while busy is full: %d %s", model, resp.StatusCode, body)
		}
	}
	// A pool with another target sends the request there.
	for range 5 {
		if st, body := h.chat("pool", ""); st != 200 || !strings.Contains(body, "spare") {
			t.Fatalf("pool while busy is full: %d %s", st, body)
		}
	}
	close(release)
	wg.Wait()
	if st, body := h.chat("r", ""); st != 200 {
		t.Fatalf("after the slot freed: %d %s", st, body)
	}
}

// /v1/models shows, for each address, the policy that governs it: the
// strictest of its own and its serving providers'.
func TestModelsShowPolicy(t *testing.T) {
	h := newHarness(t, Config{})
	up := newEcho(t, "u")
	pv := &store.Provider{OrgID: h.org.ID, Slug: "p", Name: "p", Kind: "vllm", BaseURL: up.base(), MetadataSource: "configured",
		Models: []string{"real"}, Settings: store.ProviderSettings{Policy: store.Policy{Tools: "deny", MaxOutputTokens: 300}}}
	must(t, h.db.CreateProvider(context.Background(), pv))
	h.reload()
	h.policyRoute("strict", store.Policy{Media: "deny", MaxOutputTokens: 1000, MaxConcurrency: 4}, store.Target{ProviderID: pv.ID, UpstreamModel: "real", Weight: 1})
	must(t, h.db.CreateGroup(context.Background(), &store.Group{OrgID: h.org.ID, Slug: "g", Name: "g", Strategy: "weighted",
		Policy: store.Policy{MaxOutputTokens: 50}, Members: []store.GroupMember{{ProviderID: pv.ID, Weight: 1}}}))
	h.reload()
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+h.key)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	var list struct {
		Data []modelEntry `json:"data"`
	}
	must(t, json.Unmarshal([]byte(readAll(t, resp)), &list))
	got := map[string]store.Policy{}
	for _, m := range list.Data {
		got[m.ID] = m.Policy
	}
	want := map[string]store.Policy{
		"strict": {MaxOutputTokens: 300, Tools: "deny", Media: "deny", MaxConcurrency: 4},
		"p/real": {MaxOutputTokens: 300, Tools: "deny"},
		"g/real": {MaxOutputTokens: 50, Tools: "deny"},
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: policy %+v, want %+v", id, got[id], w)
		}
	}
	if t.Failed() {
		t.Logf("listing: %+v", list.Data)
	}
}

// A fleet host's provider inherits its route's policy: host-N/model is
// governed like the fleet route, and a route policy change follows.
func TestFleetHostInheritsRoutePolicy(t *testing.T) {
	onEveryStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		up := newEcho(t, "box")
		// The host's address is where the echo upstream listens.
		hostPort := strings.TrimPrefix(up.URL, "http://")
		ip, port, _ := strings.Cut(hostPort, ":")
		var portN int
		if _, err := fmt.Sscan(port, &portN); err != nil {
			t.Fatal(err)
		}
		host := &store.Host{OrgID: h.org.ID, ProjectID: h.proj.ID, IP: ip, Port: portN, ModelName: "fleet-model",
			APIKey: secret.New("rh-a_b")}
		must(t, h.db.CreateHost(ctx, host, nil))
		must(t, h.db.RegisterHost(ctx, host.ID, store.HostRegistration{ServedModel: "served"}))
		r, err := h.db.GetRoute(ctx, h.proj.ID, "fleet-model")
		must(t, err)
		r.Policy = store.Policy{Tools: "deny"}
		must(t, h.db.UpdateRoute(ctx, r))
		h.reload()
		addr := fmt.Sprintf("host-%d/served", host.ID)
		for _, model := range []string{"fleet-model", addr} {
			if st, body := h.chat(model, withTools); st != 400 || !strings.Contains(body, "tools_denied") {
				t.Fatalf("%s with tools: %d %s", model, st, body)
			}
		}
		if st, body := h.chat(addr, ""); st != 200 {
			t.Fatalf("%s without tools: %d %s", addr, st, body)
		}
		r.Policy = store.Policy{}
		must(t, h.db.UpdateRoute(ctx, r))
		h.reload()
		if st, body := h.chat(addr, withTools); st != 200 {
			t.Fatalf("%s after the route allowed tools: %d %s", addr, st, body)
		}
	})
}

// A stream relayed past its first event (serve relays the rest, after the
// attempt's frames are gone) still holds its provider's and its route's
// concurrency slots until it ends.
func TestConcurrencyHeldWhileStreaming(t *testing.T) {
	h := newHarness(t, Config{})
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if !strings.Contains(string(body), `"stream":true`) {
			_, _ = io.WriteString(w, `{"model":"x"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"model\":\"x\",\"choices\":[]}\n\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	p := h.policyProvider("busy", up.base(), store.Policy{MaxConcurrency: 1})
	h.policyRoute("r", store.Policy{MaxConcurrency: 1}, store.Target{ProviderID: p, Weight: 1})

	resp := h.post("/v1/chat/completions", `{"model":"r","stream":true,"stream_options":{"include_usage":true}}`)
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first event: %q %v", line, err)
	}
	for _, model := range []string{"r", "busy/m"} {
		resp := h.post("/v1/chat/completions", `{"model":"`+model+`"}`)
		if body := readAll(t, resp); resp.StatusCode != 429 || !strings.Contains(body, "concurrency_limited") {
			t.Fatalf("%s while a stream holds the slot: %d %s", model, resp.StatusCode, body)
		}
	}
	close(release)
	if rest, err := io.ReadAll(br); err != nil || !strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("rest of the stream: %q %v", rest, err)
	}
	resp.Body.Close()
	// The handler releases the slots just after the client read the end.
	for _, model := range []string{"r", "busy/m"} {
		for deadline := time.Now().Add(time.Minute); ; runtimeGosched() {
			st, body := h.chat(model, "")
			if st == 200 {
				break
			}
			if st != 429 || time.Now().After(deadline) {
				t.Fatalf("%s after the stream ended: %d %s", model, st, body)
			}
		}
	}
}
