package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// TestStreamsAlwaysReportUsage: a client cannot stream for free by turning
// the usage chunk off: the gateway asks the upstream for it whatever the
// client set, counts its tokens, and strips the chunk the client did not
// ask for.
func TestStreamsAlwaysReportUsage(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		sseHeader(w)
		sseWrite(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
		if strings.Contains(string(body), `"include_usage":true`) {
			sseWrite(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`+"\n\n")
		}
		sseWrite(w, "data: [DONE]\n\n")
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	for _, c := range []struct {
		opts      string
		wantChunk bool
	}{
		{``, false},
		{`,"stream_options":{"include_usage":false}`, false},
		{`,"stream_options":{}`, false},
		{`,"stream_options":null`, false},
		{`,"stream_options":{"include_usage":false,"continuous_usage_stats":false}`, false},
		{`,"stream_options":{"include_usage":true}`, true},
	} {
		resp := h.post("/v1/chat/completions", `{"model":"m","stream":true,"messages":[]`+c.opts+`}`)
		body := readAll(t, resp)
		if got := strings.Contains(body, `"usage"`); got != c.wantChunk {
			t.Errorf("%q: usage chunk relayed = %v, want %v: %s", c.opts, got, c.wantChunk, body)
		}
		sent, _ := up.last()
		if !strings.Contains(sent, `"include_usage":true`) {
			t.Errorf("%q: the upstream was not asked for usage: %s", c.opts, sent)
		}
		if strings.Contains(c.opts, "continuous_usage_stats") && !strings.Contains(sent, `"continuous_usage_stats":false`) {
			t.Errorf("the client's other stream options were dropped: %s", sent)
		}
		recs := h.usage.all()
		if r := recs[len(recs)-1]; r.PromptTokens != 7 || r.CompletionTokens != 3 {
			t.Errorf("%q: usage recorded %d+%d tokens, want 7+3", c.opts, r.PromptTokens, r.CompletionTokens)
		}
	}
}

// TestEventBeforeDroppedUsageChunkIsSent: an event that arrived together
// with a usage chunk the client did not ask for (which the gateway drops)
// reaches the client while the upstream goes quiet, not with the upstream's
// next event.
func TestEventBeforeDroppedUsageChunkIsSent(t *testing.T) {
	h := newHarness(t, Config{})
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		sseHeader(w)
		// One write: the gateway reads both events at once.
		sseWrite(w, `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n"+
			`data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"there"}}]}`+"\n\n"+
			`data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`+"\n\n")
		select {
		case <-release:
		case <-r.Context().Done():
		}
		sseWrite(w, "data: [DONE]\n\n")
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})

	got := make(chan string, 1)
	go func() {
		resp := h.post("/v1/chat/completions", `{"model":"m","stream":true,"messages":[]}`)
		defer resp.Body.Close()
		var seen strings.Builder
		buf := make([]byte, 4096)
		for !strings.Contains(seen.String(), `"there"`) {
			n, err := resp.Body.Read(buf)
			seen.Write(buf[:n])
			if err != nil {
				break
			}
		}
		got <- seen.String()
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, `"there"`) {
			t.Errorf("the stream ended without the second event: %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Error("the event before the dropped usage chunk was not sent while the upstream waited")
	}
	close(release)
}
