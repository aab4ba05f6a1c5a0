package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
	"github.com/rolter/rolter/internal/usage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The default transport's idle connections to httptest servers are
		// closed by the servers at cleanup; these readers may linger a moment.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

const vllmChatResponse = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Moscow\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"total_tokens":30,"completion_tokens":18},"prompt_logprobs":null}`

func TestNonStreamedRelayIsByteForByte(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream-Header", "kept")
		_, _ = io.WriteString(w, vllmChatResponse)
	})
	pid := h.provider("vllm", up.base(), store.ProviderSettings{}, "sk-upstream-1")
	h.route("qwen3", "", store.Target{ProviderID: pid, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1})

	reqBody := `{"model":"qwen3","messages":[{"role":"user","content":"weather in Moscow? \u00e9"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"temperature":0.2}`
	resp := h.post("/v1/chat/completions", reqBody, "X-Api-Key", "ignored-because-bearer-wins")
	got := readAll(t, resp)
	want := strings.Replace(vllmChatResponse, `"model":"Qwen/Qwen3-8B"`, `"model":"qwen3"`, 1)
	if resp.StatusCode != 200 || got != want {
		t.Fatalf("status %d\n got %s\nwant %s", resp.StatusCode, got, want)
	}
	// Response headers come from an allowlist: an upstream's own headers
	// stay at the gateway (scenario 31).
	if resp.Header.Get("X-Rolter-Upstream-Model") != "Qwen/Qwen3-8B" || resp.Header.Get("X-Upstream-Header") != "" ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers: %v", resp.Header)
	}
	// The upstream got the target's model and every other byte unchanged,
	// with the pool key, never the client's key.
	body, auth := up.last()
	if body != strings.Replace(reqBody, `"model":"qwen3"`, `"model":"Qwen/Qwen3-8B"`, 1) {
		t.Fatalf("upstream body: %s", body)
	}
	if auth != "Bearer sk-upstream-1" {
		t.Fatalf("upstream auth: %q", auth)
	}
	recs := h.usage.all()
	if len(recs) != 1 || recs[0].PromptTokens != 12 || recs[0].CompletionTokens != 18 || recs[0].UpstreamModel != "Qwen/Qwen3-8B" ||
		recs[0].Status != 200 || recs[0].Attempts != 1 || recs[0].Route != "qwen3" || recs[0].ProviderSlug != "vllm" {
		t.Fatalf("usage: %+v", recs)
	}
}

// vLLM's stream: a role-only first chunk, content, tool call deltas, a
// finish chunk, a usage chunk (when asked), [DONE].
var vllmStream = []string{
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","index":0,"function":{"name":"f","arguments":"{\"a\":"}}]},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"logprobs":null,"finish_reason":"tool_calls"}]}` + "\n\n",
}

const vllmUsageChunk = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":7,"total_tokens":10,"completion_tokens":3}}` + "\n\n"

func streamingUpstream(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		sseHeader(w)
		sseWrite(w, vllmStream...)
		if strings.Contains(string(body), `"include_usage":true`) {
			sseWrite(w, vllmUsageChunk)
		}
		sseWrite(w, "data: [DONE]\n\n")
	})
}

func TestStreamedRelayIsByteForByte(t *testing.T) {
	h := newHarness(t, Config{})
	up := streamingUpstream(t)
	pid := h.provider("vllm", up.base(), store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: pid, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1})
	alias := func(s string) string { return strings.ReplaceAll(s, `"model":"Qwen/Qwen3-8B"`, `"model":"qwen3"`) }

	t.Run("client asks for usage", func(t *testing.T) {
		req := `{"model":"qwen3","stream":true,"stream_options":{"include_usage":true},"messages":[]}`
		resp := h.post("/v1/chat/completions", req)
		got := readAll(t, resp)
		want := alias(strings.Join(vllmStream, "") + vllmUsageChunk + "data: [DONE]\n\n")
		if got != want {
			t.Fatalf("stream\n got %q\nwant %q", got, want)
		}
		if body, _ := up.last(); body != strings.Replace(req, `"qwen3"`, `"Qwen/Qwen3-8B"`, 1) {
			t.Fatalf("upstream body: %s", body)
		}
		if resp.Header.Get("X-Rolter-Upstream-Model") != "Qwen/Qwen3-8B" || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("headers: %v", resp.Header)
		}
	})
	t.Run("gateway asks for usage and strips it", func(t *testing.T) {
		req := `{"model":"qwen3","stream":true,"messages":[]}`
		got := readAll(t, h.post("/v1/chat/completions", req))
		want := alias(strings.Join(vllmStream, "") + "data: [DONE]\n\n")
		if got != want {
			t.Fatalf("stream\n got %q\nwant %q", got, want)
		}
		body, _ := up.last()
		if body != `{"stream_options":{"include_usage":true},"model":"Qwen/Qwen3-8B","stream":true,"messages":[]}` {
			t.Fatalf("upstream body: %s", body)
		}
		recs := h.usage.all()
		last := recs[len(recs)-1]
		if last.PromptTokens != 7 || last.CompletionTokens != 3 || !last.Stream || last.TTFT <= 0 {
			t.Fatalf("usage: %+v", last)
		}
	})
}

func TestAuthFailuresLookAlike(t *testing.T) {
	h := newHarness(t, Config{})
	past := time.Now().Add(-time.Hour)
	expired := h.newKey(nil, &past)
	revoked := h.newKey(nil, nil)
	ctx := context.Background()
	keys, _ := h.db.ListVirtualKeys(ctx, h.proj.ID, store.Page{})
	must(t, h.db.RevokeVirtualKey(ctx, keys[len(keys)-1].ID, time.Now()))
	h.reload()
	var bodies []string
	for _, auth := range []string{"", "Bearer ", "Bearer rk-nope", "Bearer " + expired, "Bearer " + revoked, "Bearer " + h.key + "x"} {
		req, _ := http.NewRequest("POST", h.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"x"}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		b := readAll(t, resp)
		if resp.StatusCode != 401 {
			t.Fatalf("%q: status %d", auth, resp.StatusCode)
		}
		bodies = append(bodies, b)
	}
	for _, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("401 bodies differ: %q vs %q", b, bodies[0])
		}
	}
	// x-api-key works as well as Bearer.
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/models", nil)
	req.Header.Set("x-api-key", h.key)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	if readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("x-api-key: %d", resp.StatusCode)
	}
}

func TestRequestErrors(t *testing.T) {
	h := newHarness(t, Config{MaxBody: 1024})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	pid := h.provider("vllm", up.base(), store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: pid, Weight: 1})
	limited := h.newKey([]string{"other"}, nil)
	for _, c := range []struct {
		name, body, key string
		status          int
		code            string
	}{
		{"too large", `{"model":"qwen3","x":"` + strings.Repeat("a", 2000) + `"}`, "", 413, "body_too_large"},
		{"not json", `hello`, "", 400, "invalid_request"},
		{"no model", `{"messages":[]}`, "", 400, "invalid_request"},
		{"model not string", `{"model":5}`, "", 400, "invalid_request"},
		{"duplicate model", `{"model":"qwen3","model":"other"}`, "", 400, "invalid_request"},
		{"trailing garbage", `{"model":"qwen3"} {}`, "", 400, "invalid_request"},
		{"negative max_tokens", `{"model":"qwen3","max_tokens":-1,"messages":[]}`, "", 400, "invalid_value"},
		{"unknown model", `{"model":"gpt-9"}`, "", 404, "model_not_found"},
		{"not allowed", `{"model":"qwen3"}`, limited, 403, "model_not_allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := h.key
			if c.key != "" {
				h.key = c.key
				defer func() { h.key = key }()
			}
			resp := h.post("/v1/chat/completions", c.body)
			body := readAll(t, resp)
			if resp.StatusCode != c.status || !strings.Contains(body, `"code":"`+c.code+`"`) || !strings.Contains(body, `"message":`) {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
		})
	}
	if up.count() != 0 {
		t.Fatalf("a refused request reached the upstream %d times", up.count())
	}
}

func TestModelsList(t *testing.T) {
	h := newHarness(t, Config{})
	pid := h.provider("vllm", "http://127.0.0.1:1/v1", store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: pid, Weight: 1})
	h.route("team/llama", "", store.Target{ProviderID: pid, Weight: 1})
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+h.key)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	body := readAll(t, resp)
	if !strings.Contains(body, `"id":"qwen3"`) || !strings.Contains(body, `"id":"team/llama"`) || !strings.Contains(body, `"object":"list"`) {
		t.Fatalf("models: %s", body)
	}
}

func TestUpstream400IsPassedThroughAndNotRetried(t *testing.T) {
	h := newHarness(t, Config{})
	const errBody = `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`
	bad := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		_, _ = io.WriteString(w, errBody)
	})
	good := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	a := h.provider("a", bad.base(), store.ProviderSettings{})
	b := h.provider("b", good.base(), store.ProviderSettings{})
	h.route("m", "round_robin", store.Target{ProviderID: a, Weight: 1}, store.Target{ProviderID: b, Weight: 0})
	resp := h.post("/v1/chat/completions", `{"model":"m"}`)
	if body := readAll(t, resp); resp.StatusCode != 400 || body != errBody {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if bad.count() != 1 || good.count() != 0 {
		t.Fatalf("retried: bad %d good %d", bad.count(), good.count())
	}
}

func TestFailover(t *testing.T) {
	ok := func(t *testing.T) *upstream {
		return newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			_, _ = io.WriteString(w, `{"model":"x","choices":[]}`)
		})
	}
	for _, c := range []struct {
		name  string
		first func(t *testing.T) string
	}{
		{"connection refused", deadURL},
		{"503", func(t *testing.T) string {
			return newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				w.WriteHeader(503)
				_, _ = io.WriteString(w, `{"secret internal detail":"do not echo"}`)
			}).base()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			second := ok(t)
			a := h.provider("a", c.first(t), store.ProviderSettings{})
			b := h.provider("b", second.base(), store.ProviderSettings{})
			// round_robin starts at the first target, so the failover is forced.
			h.route("m", "round_robin", store.Target{ProviderID: a, Weight: 1}, store.Target{ProviderID: b, Weight: 1})
			const req = `{"model":"m","messages":[{"role":"user","content":"replay me byte for byte"}]}`
			resp := h.post("/v1/chat/completions", req)
			if body := readAll(t, resp); resp.StatusCode != 200 || body != `{"model":"m","choices":[]}` {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
			if body, _ := second.last(); body != req {
				t.Fatalf("replayed body differs: %s", body)
			}
			if recs := h.usage.all(); recs[0].Attempts != 2 || recs[0].ProviderSlug != "b" {
				t.Fatalf("usage: %+v", recs[0])
			}
		})
	}
}

func TestAllCandidatesFailNamesTheClass(t *testing.T) {
	h := newHarness(t, Config{})
	five := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.WriteHeader(502)
		_, _ = io.WriteString(w, `internal stack trace`)
	})
	a := h.provider("a", five.base(), store.ProviderSettings{})
	b := h.provider("b", deadURL(t), store.ProviderSettings{})
	h.route("m", "round_robin", store.Target{ProviderID: a, Weight: 1}, store.Target{ProviderID: b, Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"m"}`)
	body := readAll(t, resp)
	if resp.StatusCode != 502 || !strings.Contains(body, `"code":"upstream_unavailable"`) || !strings.Contains(body, "connect_error") ||
		strings.Contains(body, "stack trace") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
}

func TestRateLimitCoolsKeyAndUsesAnother(t *testing.T) {
	h := newHarness(t, Config{})
	var limited atomic.Bool
	limited.Store(true)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.Header.Get("Authorization") == "Bearer sk-a" && limited.Load() {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(429)
			return
		}
		_, _ = io.WriteString(w, `{"model":"x"}`)
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{}, "sk-a", "sk-b")
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	// Until key a has been hit once, requests may land on either key.
	for range 20 {
		resp := h.post("/v1/chat/completions", `{"model":"m"}`)
		if readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	tbl := h.gw.table.Load()
	keyA := tbl.providers.At(pid).keys[0]
	until := keyA.breaker.Until()
	if d := until.Sub(h.clock.Now()); d < 3*time.Second {
		t.Fatalf("key a cools for %v, want >= 3s", d)
	}
	// While it cools, every request goes straight to key b.
	n := up.count()
	for range 10 {
		resp := h.post("/v1/chat/completions", `{"model":"m"}`)
		readAll(t, resp)
	}
	if up.count()-n != 10 {
		t.Fatalf("cooling key was tried: %d upstream calls for 10 requests", up.count()-n)
	}
	if _, auth := up.last(); auth != "Bearer sk-b" {
		t.Fatalf("auth %q", auth)
	}
}

func TestRateLimitEverywhereReturnsLargestRetryAfter(t *testing.T) {
	h := newHarness(t, Config{MaxAttempts: 5})
	mk := func(ra string) string {
		return newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("Retry-After", ra)
			w.WriteHeader(429)
		}).base()
	}
	a := h.provider("a", mk("2"), store.ProviderSettings{})
	b := h.provider("b", mk("7"), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: a, Weight: 1}, store.Target{ProviderID: b, Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"m"}`)
	body := readAll(t, resp)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || !strings.Contains(body, `"code":"rate_limited"`) {
		t.Fatalf("status %d retry-after %q body %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if recs := h.usage.all(); recs[0].Attempts != 2 {
		t.Fatalf("attempts %d: retries must be bounded by the candidates", recs[0].Attempts)
	}
}

func TestMidStreamBreakEndsWithErrorEvent(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		sseHeader(w)
		sseWrite(w, vllmStream[:3]...)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
				_ = tc.SetLinger(0) // RST, not FIN
			}
			conn.Close()
		}
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: pid, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"qwen3","stream":true}`)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if len(events) != 4 {
		t.Fatalf("events: %q", events)
	}
	for i := range 3 {
		if !strings.Contains(events[i], `"model":"qwen3"`) {
			t.Fatalf("event %d: %s", i, events[i])
		}
	}
	if !strings.HasPrefix(events[3], `data: {"error":{`) || !strings.Contains(events[3], `"code":"upstream_stream_error"`) {
		t.Fatalf("last event: %s", events[3])
	}
	for _, e := range events {
		if strings.Contains(e, "[DONE]") {
			t.Fatal("[DONE] after a broken stream")
		}
	}
	if recs := h.usage.all(); recs[0].Class != string(ClassStreamBroken) {
		t.Fatalf("usage class %q", recs[0].Class)
	}
}

func TestWeightsHold(t *testing.T) {
	h := newHarness(t, Config{})
	var hitsA, hitsB, hitsC atomic.Int64
	mk := func(n *atomic.Int64) string {
		return newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			n.Add(1)
			_, _ = io.WriteString(w, `{}`)
		}).base()
	}
	a := h.provider("a", mk(&hitsA), store.ProviderSettings{})
	b := h.provider("b", mk(&hitsB), store.ProviderSettings{})
	c := h.provider("c", mk(&hitsC), store.ProviderSettings{})
	h.route("m", "weighted", store.Target{ProviderID: a, Weight: 3}, store.Target{ProviderID: b, Weight: 1}, store.Target{ProviderID: c, Weight: 2})
	// Target c cools: no request may reach it, and a and b keep 3:1.
	h.gw.state(targetID{c, ""}, false).breaker.RateLimited(time.Hour)
	const n = 10000
	for range n {
		resp := h.post("/v1/chat/completions", `{"model":"m"}`)
		readAll(t, resp)
	}
	if hitsC.Load() != 0 {
		t.Fatalf("cooling target got %d requests", hitsC.Load())
	}
	share := float64(hitsA.Load()) / n
	if share < 0.72 || share > 0.78 {
		t.Fatalf("weights 3:1 split %d/%d (%.3f)", hitsA.Load(), hitsB.Load(), share)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	const runs = 50
	h := newHarness(t, Config{})
	cancelled := make(chan time.Time, runs)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		sseHeader(w)
		sseWrite(w, vllmStream[0])
		<-r.Context().Done()
		cancelled <- time.Now()
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	for i := range runs {
		ctx, cancel := context.WithCancel(context.Background())
		resp := h.postCtx(ctx, "/v1/chat/completions", `{"model":"m","stream":true}`)
		buf := make([]byte, 16)
		if _, err := io.ReadAtLeast(resp.Body, buf, 1); err != nil { // the stream is flowing
			t.Fatal(err)
		}
		at := time.Now()
		cancel()
		resp.Body.Close()
		select {
		case got := <-cancelled:
			// Propagated, not timed out (the idle timeout is 120 s); a
			// generous bound for a loaded machine.
			if d := got.Sub(at); d > 30*time.Second {
				t.Fatalf("run %d: upstream cancelled after %v", i, d)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d: upstream never saw the cancel", i)
		}
	}
	// Each request is recorded once, as 499, and the target is not penalised.
	// The handler records after the relay returns.
	testkit.Eventually(t, "a usage record per request", func() bool { return len(h.usage.all()) >= runs })
	recs := h.usage.all()
	if len(recs) != runs {
		t.Fatalf("%d usage records for %d requests", len(recs), runs)
	}
	for _, r := range recs {
		if r.Status != 499 || r.Class != string(ClassClientCancelled) {
			t.Fatalf("record %+v", r)
		}
	}
	if st := h.gw.state(targetID{pid, ""}, false).breaker.State(); st != "closed" {
		t.Fatalf("target penalised: %s", st)
	}
}

func TestFirstByteTimeoutFailsOver(t *testing.T) {
	h := newHarness(t, Config{})
	slow := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		<-r.Context().Done() // never answers
	})
	fast := streamingUpstream(t)
	a := h.provider("slow", slow.base(), store.ProviderSettings{FirstByteTimeout: store.Duration(100 * time.Millisecond)})
	b := h.provider("fast", fast.base(), store.ProviderSettings{})
	h.route("m", "round_robin", store.Target{ProviderID: a, Weight: 1}, store.Target{ProviderID: b, Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"m","stream":true}`)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if len(events) != len(vllmStream)+1 || events[len(events)-1] != "data: [DONE]" {
		t.Fatalf("events: %q", events)
	}
	if recs := h.usage.all(); recs[0].Attempts != 2 {
		t.Fatalf("attempts: %d", recs[0].Attempts)
	}
}

func TestIdleTimeoutEndsStream(t *testing.T) {
	h := newHarness(t, Config{})
	stalled := make(chan time.Time, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		sseHeader(w)
		sseWrite(w, vllmStream[:2]...)
		<-r.Context().Done()
		stalled <- time.Now()
	})
	const idle = 200 * time.Millisecond
	pid := h.provider("p", up.base(), store.ProviderSettings{IdleTimeout: store.Duration(idle)})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"m","stream":true}`)
	defer resp.Body.Close()
	// Time from the last good event to the error event.
	br := bufio.NewReader(resp.Body)
	var (
		events   []string
		lastGood time.Time
		elapsed  time.Duration
	)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		if line == "\n" {
			continue
		}
		events = append(events, line)
		if strings.Contains(line, `"error"`) {
			elapsed = time.Since(lastGood)
		} else {
			lastGood = time.Now()
		}
	}
	if len(events) != 3 || !strings.Contains(events[2], `"code":"upstream_timeout"`) {
		t.Fatalf("events: %q", events)
	}
	// The idle timer ended it, not the 300 s first-byte timeout: a bound far
	// above idle and far below that, since a loaded 2-core machine may
	// delay the reads that time it (no tight timing).
	if elapsed > idle+10*time.Second {
		t.Fatalf("idle timeout fired %v after the last event (idle %v)", elapsed, idle)
	}
	select {
	case <-stalled: // the upstream request was cancelled
	case <-time.After(2 * time.Second):
		t.Fatal("upstream request not cancelled")
	}
}

func TestMetricsAreExposed(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	pid := h.provider("p", up.base(), store.ProviderSettings{}, "sk-metrics-FAKE")
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	readAll(t, h.post("/v1/chat/completions", `{"model":"m"}`))
	mfs, err := h.reg.Gather()
	must(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		if strings.Contains(mf.String(), "sk-metrics-FAKE") || strings.Contains(mf.String(), h.key) {
			t.Fatalf("secret in metric %s", mf.GetName())
		}
	}
	for _, want := range []string{"rolter_requests_total", "rolter_request_duration_seconds", "rolter_in_flight_requests",
		"rolter_upstream_attempts_total", "rolter_cooldown"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("metric %s missing (have %v)", want, names)
		}
	}
	_ = fmt.Sprint()
}

// TestStoreOutageKeepsServing: with the store gone, requests are served
// from the snapshot; usage records are dropped and counted, not queued.
func TestStoreOutageKeepsServing(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{"model":"x"}`) })
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})

	rec := usage.New(h.db, usage.Config{Buffer: 64, Batch: 16, Interval: 10 * time.Millisecond}, nil)
	rec.OnDrop = h.gw.Metrics().UsageDropped
	h.gw.usage = rec
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rec.Run(ctx) }()

	must(t, h.db.Close()) // the outage
	const n = 200
	for range n {
		resp := h.post("/v1/chat/completions", `{"model":"m"}`)
		if body := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d during store outage: %s", resp.StatusCode, body)
		}
	}
	cancel()
	<-done
	if rec.Written() != 0 || rec.Dropped() != n {
		t.Fatalf("written %d dropped %d, want 0 and %d", rec.Written(), rec.Dropped(), n)
	}
	mfs, err := h.reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "rolter_usage_dropped_total" {
			if v := mf.GetMetric()[0].GetCounter().GetValue(); v != n {
				t.Fatalf("drop metric %v, want %d", v, n)
			}
			return
		}
	}
	t.Fatal("rolter_usage_dropped_total missing")
}
