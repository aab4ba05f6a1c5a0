package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// TestEveryEndpointKeepsTheCallerContract: completions, embeddings and the
// responses API (whose stream events carry the model inside "response")
// all report the client's model string.
func TestEveryEndpointKeepsTheCallerContract(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		streaming := strings.Contains(string(body), `"stream":true`)
		switch r.URL.Path {
		case "/v1/completions":
			if streaming {
				sseHeader(w)
				sseWrite(w, `data: {"id":"c","object":"text_completion","model":"up/m","choices":[{"index":0,"text":"hi","finish_reason":null}]}`+"\n\n", "data: [DONE]\n\n")
				return
			}
			_, _ = io.WriteString(w, `{"id":"c","object":"text_completion","model":"up/m","choices":[{"text":"hi","index":0}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
		case "/v1/embeddings":
			_, _ = io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"up/m","usage":{"prompt_tokens":2,"total_tokens":2}}`)
		case "/v1/responses":
			if streaming {
				sseHeader(w)
				sseWrite(w,
					"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"object\":\"response\",\"model\":\"up/m\",\"status\":\"in_progress\"}}\n\n",
					"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n",
					"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"model\":\"up/m\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n")
				return
			}
			_, _ = io.WriteString(w, `{"id":"r","object":"response","model":"up/m","output":[],"usage":{"input_tokens":3,"output_tokens":1}}`)
		default:
			w.WriteHeader(404)
		}
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("alias", "", store.Target{ProviderID: pid, UpstreamModel: "up/m", Weight: 1})
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"model":"alias","prompt":"x"}`},
		{"/v1/completions", `{"model":"alias","prompt":"x","stream":true}`},
		{"/v1/embeddings", `{"model":"alias","input":"x"}`},
		{"/v1/responses", `{"model":"alias","input":"x"}`},
		{"/v1/responses", `{"model":"alias","input":"x","stream":true}`},
	} {
		resp := h.post(c.path, c.body)
		got := readAll(t, resp)
		if resp.StatusCode != 200 || strings.Contains(got, "up/m") || !strings.Contains(got, `"model":"alias"`) {
			t.Fatalf("%s %s: %d %s", c.path, c.body, resp.StatusCode, got)
		}
		if body, _ := up.last(); !strings.Contains(body, `"model":"up/m"`) {
			t.Fatalf("upstream got %s", body)
		}
	}
	recs := h.usage.all()
	if last := recs[len(recs)-1]; last.PromptTokens != 3 || last.CompletionTokens != 1 {
		t.Fatalf("responses stream usage: %+v", last)
	}
}

// TestConsecutiveFailuresEjectAndProbe: a target failing with 5xx is
// ejected after the threshold, gets exactly one half-open probe when its
// cooldown ends, and is cooled longer when the probe fails.
func TestConsecutiveFailuresEjectAndProbe(t *testing.T) {
	h := newHarness(t, Config{})
	bad := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { w.WriteHeader(500) })
	good := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	a := h.provider("bad", bad.base(), store.ProviderSettings{})
	b := h.provider("good", good.base(), store.ProviderSettings{})
	h.route("m", "round_robin", store.Target{ProviderID: a, Weight: 1}, store.Target{ProviderID: b, Weight: 1})
	send := func(n int) {
		for range n {
			resp := h.post("/v1/chat/completions", `{"model":"m"}`)
			if readAll(t, resp); resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	send(20)
	if bad.count() != 3 {
		t.Fatalf("bad target got %d requests before ejection, want the threshold 3", bad.count())
	}
	br := h.gw.state(targetID{a, ""}, false).breaker
	first := br.Until().Sub(h.clock.Now())
	h.clock.Advance(first)
	send(20)
	if bad.count() != 4 {
		t.Fatalf("after the cooldown, %d probes; want exactly 1", bad.count()-3)
	}
	if second := br.Until().Sub(h.clock.Now()); second <= first {
		t.Fatalf("failed probe cooled for %v, not longer than %v", second, first)
	}
}

// TestPanicModeTriesEarliestCooldown: with every target cooling, the one
// whose cooldown ends first is tried instead of failing the request.
func TestPanicModeTriesEarliestCooldown(t *testing.T) {
	h := newHarness(t, Config{MaxAttempts: 1})
	var hits [2]int
	mk := func(i int) string {
		return newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			hits[i]++
			_, _ = io.WriteString(w, `{}`)
		}).base()
	}
	a := h.provider("a", mk(0), store.ProviderSettings{})
	b := h.provider("b", mk(1), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: a, Weight: 1}, store.Target{ProviderID: b, Weight: 1})
	h.gw.state(targetID{a, ""}, false).breaker.RateLimited(time.Hour)
	h.gw.state(targetID{b, ""}, false).breaker.RateLimited(time.Minute)
	resp := h.post("/v1/chat/completions", `{"model":"m"}`)
	if readAll(t, resp); resp.StatusCode != 200 || hits[1] != 1 || hits[0] != 0 {
		t.Fatalf("status %d hits %v: want the target that recovers first", resp.StatusCode, hits)
	}
}
