package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// Every answer of the data path carries X-Request-Id: the client's when it
// sent a sane one, else a made-up one; errors and streams included. The
// upstream gets the same id.
func TestRequestIDOnEveryAnswer(t *testing.T) {
	h := newHarness(t, Config{MaxBody: 4 << 10})
	var upstreamIDs []string
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		upstreamIDs = append(upstreamIDs, r.Header.Get("X-Request-Id")) // one request at a time
		switch {
		case strings.Contains(string(body), `"stream":true`):
			sseHeader(w)
			sseWrite(w, vllmTextStream...)
		case strings.Contains(string(body), "fail-upstream"):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"bad","type":"invalid_request_error","code":"bad"}}`)
		default:
			_, _ = io.WriteString(w, vllmTextResponse)
		}
	})
	p := h.provider("vllm", up.base(), store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: p, Weight: 1})
	tok, lookup := secret.Mint(secret.PrefixVirtualKey)
	must(t, h.db.CreateVirtualKey(context.Background(), &store.VirtualKey{ProjectID: h.proj.ID, Name: "one-a-minute",
		Lookup: lookup, Hash: secret.HashOf(tok.Reveal()), RPMLimit: 1}))
	h.reload()
	limited := tok.Reveal()

	type call struct {
		name, method, path, key, body string
		status                        int
		stream                        bool
	}
	calls := []call{
		{"no key", "POST", "/v1/chat/completions", "", `{"model":"qwen3"}`, 401, false},
		{"bad key", "POST", "/v1/messages", "rk-nope", `{"model":"qwen3"}`, 401, false},
		{"list without key", "GET", "/v1/models", "", "", 401, false},
		{"retrieve without key", "GET", "/v1/models/qwen3", "", "", 401, false},
		{"list", "GET", "/v1/models", h.key, "", 200, false},
		{"retrieve", "GET", "/v1/models/vllm/qwen3", h.key, "", 200, false},
		{"retrieve unknown", "GET", "/v1/models/vllm/nope", h.key, "", 404, false},
		{"no such endpoint", "POST", "/v1/nope", h.key, "{}", 404, false},
		{"wrong method", "GET", "/v1/chat/completions", h.key, "", 404, false},
		{"unknown model", "POST", "/v1/chat/completions", h.key, `{"model":"nope"}`, 404, false},
		{"bad json", "POST", "/v1/chat/completions", h.key, `{"model":`, 400, false},
		{"too large", "POST", "/v1/chat/completions", h.key, `{"model":"qwen3","x":"` + strings.Repeat("x", 8<<10) + `"}`, 413, false},
		{"upstream refusal", "POST", "/v1/chat/completions", h.key, `{"model":"qwen3","fail-upstream":1}`, 400, false},
		{"first of a minute", "POST", "/v1/chat/completions", limited, `{"model":"qwen3"}`, 200, false},
		{"second of a minute", "POST", "/v1/chat/completions", limited, `{"model":"qwen3"}`, 429, false},
		{"stream", "POST", "/v1/chat/completions", h.key, `{"model":"qwen3","stream":true}`, 200, true},
		{"translated stream", "POST", "/v1/messages", h.key, `{"model":"qwen3","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200, true},
	}
	do := func(c call, sent string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(c.method, h.srv.URL+c.path, strings.NewReader(c.body))
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		if sent != "" {
			req.Header.Set("X-Request-Id", sent)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		body := readAll(t, resp)
		if resp.StatusCode != c.status {
			t.Fatalf("%s: status %d, want %d: %s", c.name, resp.StatusCode, c.status, body)
		}
		if c.stream && (!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(body, "data: ")) {
			t.Fatalf("%s: not a stream: %q %s", c.name, resp.Header.Get("Content-Type"), body)
		}
		return resp
	}
	seen := map[string]bool{}
	for i, c := range calls {
		// The client's id comes back as sent.
		sent := "client-id-" + strings.ReplaceAll(c.name, " ", "-")
		before := len(upstreamIDs)
		if resp := do(c, sent); resp.Header.Get("X-Request-Id") != sent {
			t.Fatalf("%s: X-Request-Id %q, want the client's %q", c.name, resp.Header.Get("X-Request-Id"), sent)
		}
		if len(upstreamIDs) > before && upstreamIDs[len(upstreamIDs)-1] != sent {
			t.Fatalf("%s: the upstream got request id %q, want %q", c.name, upstreamIDs[len(upstreamIDs)-1], sent)
		}
		if c.name == "first of a minute" || c.name == "second of a minute" {
			continue // the limit is spent; once with the client's id is enough
		}
		// Without one, or with one that is not a sane token, the gateway
		// makes one up, a new one per request.
		for _, bad := range []string{"", "has space", strings.Repeat("x", 129)} {
			id := do(c, bad).Header.Get("X-Request-Id")
			if !strings.HasPrefix(id, "req-") || seen[id] {
				t.Fatalf("%s (sent %.10q): made-up id %q (request %d)", c.name, bad, id, i)
			}
			seen[id] = true
		}
	}
}
