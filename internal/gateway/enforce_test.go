package gateway

import (
	"net/http"
	"strings"
	"testing"

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
