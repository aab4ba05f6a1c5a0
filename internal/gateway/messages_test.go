package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

func (h *harness) anthropicProvider(slug, base, key string) int64 {
	p := &store.Provider{OrgID: h.org.ID, Slug: slug, Name: slug, Kind: "anthropic", BaseURL: base, MetadataSource: "configured",
		Keys: []store.ProviderKey{{Secret: secret.New(key), Weight: 1}}}
	must(h.t, h.db.CreateProvider(context.Background(), p))
	h.reload()
	return p.ID
}

const claudeRequest = `{"model":"qwen3","max_tokens":256,"system":"Be brief.","messages":[{"role":"user","content":"Weather in Moscow?"}],"tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]}`

// TestMessagesToOpenAIUpstream: a Claude-style client reaches a vLLM
// upstream; the request is translated, and the answer comes back in the
// Messages shape with the client's model.
func TestMessagesToOpenAIUpstream(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/chat/completions" {
			w.WriteHeader(404)
			return
		}
		if strings.Contains(string(body), `"stream":true`) {
			sseHeader(w)
			sseWrite(w, vllmStream...)
			sseWrite(w, vllmUsageChunk, "data: [DONE]\n\n")
			return
		}
		_, _ = io.WriteString(w, vllmChatResponse)
	})
	pid := h.provider("vllm", up.base(), store.ProviderSettings{}, "sk-vllm")
	h.route("qwen3", "", store.Target{ProviderID: pid, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1})

	resp := h.post("/v1/messages", claudeRequest, "anthropic-version", "2023-06-01")
	body := readAll(t, resp)
	var msg struct {
		Type       string `json:"type"`
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string          `json:"type"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if msg.Type != "message" || msg.Model != "qwen3" || msg.StopReason != "tool_use" || len(msg.Content) != 1 ||
		msg.Content[0].Type != "tool_use" || msg.Content[0].Name != "get_weather" || msg.Usage.InputTokens != 12 {
		t.Fatalf("message: %s", body)
	}
	sent, auth := up.last()
	if !strings.Contains(sent, `"model":"Qwen/Qwen3-8B"`) || !strings.Contains(sent, `"role":"system"`) || auth != "Bearer sk-vllm" {
		t.Fatalf("upstream got %s (auth %q)", sent, auth)
	}

	resp = h.post("/v1/messages", strings.Replace(claudeRequest, `"max_tokens":256`, `"max_tokens":256,"stream":true`, 1))
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	var names []string
	for _, e := range events {
		if name, _, ok := strings.Cut(e, "data:"); ok {
			names = append(names, strings.TrimPrefix(name, "event: "))
		}
	}
	joined := strings.Join(names, ",")
	if !strings.HasPrefix(joined, "message_start,content_block_start,content_block_delta") || !strings.HasSuffix(joined, "message_delta,message_stop") ||
		!strings.Contains(events[0], `"model":"qwen3"`) || strings.Contains(strings.Join(events, ""), "Qwen/Qwen3-8B") {
		t.Fatalf("events %v\n%q", names, events)
	}
	if recs := h.usage.all(); recs[len(recs)-1].PromptTokens != 7 || recs[len(recs)-1].CompletionTokens != 3 {
		t.Fatalf("streamed usage: %+v", recs[len(recs)-1])
	}
}

// TestChatToAnthropicUpstream: an OpenAI-style client reaches an Anthropic
// upstream, with x-api-key and anthropic-version set by the gateway.
func TestChatToAnthropicUpstream(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != "sk-ant-FAKE" || r.Header.Get("Anthropic-Version") == "" ||
			r.Header.Get("Authorization") != "" {
			w.WriteHeader(400)
			return
		}
		if strings.Contains(string(body), `"stream":true`) {
			sseHeader(w)
			sseWrite(w,
				"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n",
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			return
		}
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":2}}`)
	})
	pid := h.anthropicProvider("claude", up.base(), "sk-ant-FAKE")
	h.route("smart", "", store.Target{ProviderID: pid, UpstreamModel: "claude-x", Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"smart","messages":[{"role":"system","content":"s"},{"role":"user","content":"hello"}]}`)
	body := readAll(t, resp)
	if resp.StatusCode != 200 || !strings.Contains(body, `"object":"chat.completion"`) || !strings.Contains(body, `"model":"smart"`) ||
		!strings.Contains(body, `"content":"Hi"`) || !strings.Contains(body, `"finish_reason":"stop"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if sent, _ := up.last(); !strings.Contains(sent, `"system":"s"`) || !strings.Contains(sent, `"model":"claude-x"`) {
		t.Fatalf("upstream got %s", sent)
	}
	resp = h.post("/v1/chat/completions", `{"model":"smart","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	stream := readAll(t, resp)
	if !strings.Contains(stream, `"object":"chat.completion.chunk"`) || !strings.Contains(stream, `"content":"Hi"`) ||
		!strings.HasSuffix(stream, "data: [DONE]\n\n") || strings.Contains(stream, "claude-x") {
		t.Fatalf("stream: %s", stream)
	}
	if n := up.count(); n != 2 {
		t.Fatalf("upstream calls: %d", n)
	}
}

// TestMessagesPassThrough: Messages to an Anthropic upstream changes only
// the model, and anthropic-version is forwarded unchanged.
func TestMessagesPassThrough(t *testing.T) {
	h := newHarness(t, Config{})
	const answer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":2}}`
	var seenVersion atomic.Value
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		seenVersion.Store(r.Header.Get("Anthropic-Version"))
		_, _ = io.WriteString(w, answer)
	})
	pid := h.anthropicProvider("claude", up.base(), "sk-ant-FAKE")
	h.route("smart", "", store.Target{ProviderID: pid, UpstreamModel: "claude-x", Weight: 1})
	req := `{"model":"smart","max_tokens":10,"messages":[{"role":"user","content":"hello"}],"thinking":{"type":"enabled","budget_tokens":1024}}`
	resp := h.post("/v1/messages", req, "anthropic-version", "2099-01-01")
	body := readAll(t, resp)
	if resp.StatusCode != 200 || body != strings.Replace(answer, `"model":"claude-x"`, `"model":"smart"`, 1) || seenVersion.Load() != "2099-01-01" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if sent, _ := up.last(); sent != strings.Replace(req, `"model":"smart"`, `"model":"claude-x"`, 1) {
		t.Fatalf("upstream got %s", sent)
	}
}

func TestMessagesErrorsUseAnthropicShape(t *testing.T) {
	h := newHarness(t, Config{})
	pid := h.provider("vllm", "http://127.0.0.1:1/v1", store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: pid, Weight: 1})
	for _, c := range []struct {
		name, key, body, typ string
		status               int
	}{
		{"bad key", "rk-nope", claudeRequest, "authentication_error", 401},
		{"unknown model", "", strings.Replace(claudeRequest, `"qwen3"`, `"nope"`, 1), "not_found_error", 404},
		{"unrepresentable", "", `{"model":"qwen3","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}`, "invalid_request_error", 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.key != "" {
				old := h.key
				h.key = c.key
				defer func() { h.key = old }()
			}
			resp := h.post("/v1/messages", c.body)
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type, Message string
				} `json:"error"`
			}
			body := readAll(t, resp)
			if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != c.status || e.Type != "error" || e.Error.Type != c.typ || e.Error.Message == "" {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if c.name == "unrepresentable" && !strings.Contains(body, "messages[0].content[0]") {
				t.Fatalf("the error does not name the field: %s", body)
			}
		})
	}
}

func TestCountTokensPassThrough(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/messages/count_tokens" {
			w.WriteHeader(404)
			return
		}
		_, _ = io.WriteString(w, `{"input_tokens":14}`)
	})
	pid := h.anthropicProvider("claude", up.base(), "sk-ant-FAKE")
	h.route("smart", "", store.Target{ProviderID: pid, UpstreamModel: "claude-x", Weight: 1})
	vl := h.provider("vllm", "http://127.0.0.1:1/v1", store.ProviderSettings{})
	h.route("local", "", store.Target{ProviderID: vl, Weight: 1})
	resp := h.post("/v1/messages/count_tokens", `{"model":"smart","messages":[{"role":"user","content":"hello"}]}`)
	if body := readAll(t, resp); resp.StatusCode != 200 || body != `{"input_tokens":14}` {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if sent, _ := up.last(); !strings.Contains(sent, `"model":"claude-x"`) {
		t.Fatalf("upstream got %s", sent)
	}
	resp = h.post("/v1/messages/count_tokens", `{"model":"local","messages":[{"role":"user","content":"hello"}]}`)
	if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "count_tokens") || !strings.Contains(body, `"type":"error"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}
