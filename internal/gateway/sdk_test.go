package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/rolter/rolter/internal/store"
)

// End-to-end tests with the official SDKs as clients: each SDK talks to the
// gateway, whose upstream speaks the other API, so every answer the SDK
// decodes went through a translator.

// vLLM fixtures for plain text (the tool-call fixtures are vllmChatResponse
// and vllmStream).
const vllmTextResponse = `{"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there","tool_calls":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2},"prompt_logprobs":null}`

var vllmTextStream = []string{
	`data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	`data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	`data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	`data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n",
	`data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2}}` + "\n\n",
	"data: [DONE]\n\n",
}

// Anthropic fixtures.
const (
	claudeTextResponse = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hello there"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":2}}`
	claudeToolResponse = `{"id":"msg_02","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Moscow"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":15}}`
)

var claudeTextStream = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_03\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
	"event: ping\ndata: {\"type\":\"ping\"}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" there\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

var claudeToolStream = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_04\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me check.\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \\\"Mos\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"cow\\\"}\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

// sdkVLLMUpstream answers chat completions: tool calls when the request
// offers tools, text otherwise, streamed when asked.
func sdkVLLMUpstream(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/chat/completions" {
			w.WriteHeader(404)
			return
		}
		var req struct {
			Stream bool              `json:"stream"`
			Tools  []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			w.WriteHeader(400)
			return
		}
		switch {
		case req.Stream && len(req.Tools) > 0:
			sseHeader(w)
			sseWrite(w, vllmStream...)
			sseWrite(w, vllmUsageChunk, "data: [DONE]\n\n")
		case req.Stream:
			sseHeader(w)
			sseWrite(w, vllmTextStream...)
		case len(req.Tools) > 0:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, vllmChatResponse)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, vllmTextResponse)
		}
	})
}

// sdkClaudeUpstream answers Messages requests the same way.
func sdkClaudeUpstream(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != "sk-ant-FAKE" || r.Header.Get("Anthropic-Version") == "" {
			w.WriteHeader(400)
			return
		}
		var req struct {
			Stream bool              `json:"stream"`
			Tools  []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			w.WriteHeader(400)
			return
		}
		switch {
		case req.Stream && len(req.Tools) > 0:
			sseHeader(w)
			sseWrite(w, claudeToolStream...)
		case req.Stream:
			sseHeader(w)
			sseWrite(w, claudeTextStream...)
		case len(req.Tools) > 0:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, claudeToolResponse)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, claudeTextResponse)
		}
	})
}

func TestSDKAnthropicToOpenAIUpstream(t *testing.T) {
	h := newHarness(t, Config{})
	up := sdkVLLMUpstream(t)
	pid := h.provider("vllm", up.base(), store.ProviderSettings{}, "sk-vllm")
	h.route("qwen3", "", store.Target{ProviderID: pid, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1})

	client := anthropic.NewClient(aoption.WithBaseURL(h.srv.URL), aoption.WithAPIKey(h.key), aoption.WithMaxRetries(0))
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model:     "qwen3",
		MaxTokens: 256,
		System:    []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	}

	t.Run("text", func(t *testing.T) {
		msg, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Model != "qwen3" || msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) != 1 ||
			msg.Content[0].Type != "text" || msg.Content[0].AsText().Text != "Hello there" || msg.Usage.InputTokens != 5 || msg.Usage.OutputTokens != 2 {
			t.Fatalf("message: %s", msg.RawJSON())
		}
		sent, auth := up.last()
		if !strings.Contains(sent, `"model":"Qwen/Qwen3-8B"`) || !strings.Contains(sent, `"role":"system"`) || auth != "Bearer sk-vllm" {
			t.Fatalf("upstream got %s (auth %q)", sent, auth)
		}
	})

	t.Run("streamed text", func(t *testing.T) {
		stream := client.Messages.NewStreaming(ctx, params)
		defer stream.Close()
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if msg.Model != "qwen3" || msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) != 1 ||
			msg.Content[0].AsText().Text != "Hello there" || msg.Usage.OutputTokens != 2 {
			t.Fatalf("accumulated: %+v", msg)
		}
		if sent, _ := up.last(); !strings.Contains(sent, `"stream":true`) {
			t.Fatalf("upstream got %s", sent)
		}
	})

	t.Run("tool use", func(t *testing.T) {
		p := params
		p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Moscow?"))}
		p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        "get_weather",
			Description: anthropic.String("Current weather for a city"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
		}}}
		msg, err := client.Messages.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Model != "qwen3" || msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 {
			t.Fatalf("message: %s", msg.RawJSON())
		}
		tu := msg.Content[0].AsToolUse()
		var in struct{ City string }
		if tu.Type != "tool_use" || tu.Name != "get_weather" || tu.ID != "call_1" || json.Unmarshal(tu.Input, &in) != nil || in.City != "Moscow" {
			t.Fatalf("tool_use: %s", msg.RawJSON())
		}
		if sent, _ := up.last(); !strings.Contains(sent, `"type":"function"`) || !strings.Contains(sent, `"name":"get_weather"`) {
			t.Fatalf("upstream got %s", sent)
		}
	})

	t.Run("streamed tool use", func(t *testing.T) {
		p := params
		p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "f", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"a": map[string]any{"type": "integer"}}}}}}
		stream := client.Messages.NewStreaming(ctx, p)
		defer stream.Close()
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if msg.Model != "qwen3" || msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 || msg.Content[0].AsText().Text != "Hi" {
			t.Fatalf("accumulated: %+v", msg)
		}
		tu := msg.Content[1].AsToolUse()
		var in struct{ A int }
		if tu.Name != "f" || tu.ID != "call_1" || json.Unmarshal(tu.Input, &in) != nil || in.A != 1 {
			t.Fatalf("tool_use: %+v (input %s)", tu, tu.Input)
		}
	})
}

func TestSDKOpenAIToAnthropicUpstream(t *testing.T) {
	h := newHarness(t, Config{})
	up := sdkClaudeUpstream(t)
	pid := h.anthropicProvider("claude", up.base(), "sk-ant-FAKE")
	h.route("smart", "", store.Target{ProviderID: pid, UpstreamModel: "claude-x", Weight: 1})

	client := openai.NewClient(ooption.WithBaseURL(h.srv.URL+"/v1"), ooption.WithAPIKey(h.key), ooption.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model: "smart",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Be brief."),
			openai.UserMessage("Say hello"),
		},
		MaxTokens: openai.Int(256),
	}

	t.Run("text", func(t *testing.T) {
		cc, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if cc.Model != "smart" || len(cc.Choices) != 1 || cc.Choices[0].Message.Content != "Hello there" ||
			cc.Choices[0].FinishReason != "stop" || cc.Usage.PromptTokens != 9 || cc.Usage.CompletionTokens != 2 {
			t.Fatalf("completion: %s", cc.RawJSON())
		}
		if sent, _ := up.last(); !strings.Contains(sent, `"system":"Be brief."`) || !strings.Contains(sent, `"model":"claude-x"`) ||
			!strings.Contains(sent, `"max_tokens":256`) {
			t.Fatalf("upstream got %s", sent)
		}
	})

	t.Run("streamed text", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		defer stream.Close()
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			chunk := stream.Current()
			if !acc.AddChunk(chunk) {
				t.Fatalf("accumulator refused chunk %s", chunk.RawJSON())
			}
			if chunk.Model != "smart" {
				t.Fatalf("chunk model: %s", chunk.RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Model != "smart" || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hello there" || acc.Choices[0].FinishReason != "stop" {
			t.Fatalf("accumulated: %+v", acc.ChatCompletion)
		}
		if sent, _ := up.last(); !strings.Contains(sent, `"stream":true`) {
			t.Fatalf("upstream got %s", sent)
		}
	})

	t.Run("tool use", func(t *testing.T) {
		p := params
		p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Moscow?")}
		p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        "get_weather",
			Description: openai.String("Current weather for a city"),
			Parameters:  shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
		})}
		cc, err := client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if cc.Model != "smart" || len(cc.Choices) != 1 || cc.Choices[0].FinishReason != "tool_calls" || len(cc.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("completion: %s", cc.RawJSON())
		}
		tc := cc.Choices[0].Message.ToolCalls[0]
		var args struct{ City string }
		if tc.Type != "function" || tc.ID != "toolu_01" || tc.Function.Name != "get_weather" ||
			json.Unmarshal([]byte(tc.Function.Arguments), &args) != nil || args.City != "Moscow" {
			t.Fatalf("tool call: %s", cc.RawJSON())
		}
		if cc.Choices[0].Message.Content != "Let me check." {
			t.Fatalf("content: %s", cc.RawJSON())
		}
		if sent, _ := up.last(); !strings.Contains(sent, `"input_schema":{`) || !strings.Contains(sent, `"name":"get_weather"`) {
			t.Fatalf("upstream got %s", sent)
		}
	})
	t.Run("streamed tool use", func(t *testing.T) {
		p := params
		p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Moscow?")}
		p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:       "get_weather",
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})}
		stream := client.Chat.Completions.NewStreaming(ctx, p)
		defer stream.Close()
		var (
			acc      openai.ChatCompletionAccumulator
			finished []openai.FinishedChatCompletionToolCall
		)
		for stream.Next() {
			if !acc.AddChunk(stream.Current()) {
				t.Fatalf("accumulator refused chunk %s", stream.Current().RawJSON())
			}
			if tc, ok := acc.JustFinishedToolCall(); ok {
				finished = append(finished, tc)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Model != "smart" || len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" ||
			acc.Choices[0].Message.Content != "Let me check." || len(acc.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("accumulated: %+v", acc.ChatCompletion)
		}
		tc := acc.Choices[0].Message.ToolCalls[0]
		var args struct{ City string }
		if tc.ID != "toolu_01" || tc.Function.Name != "get_weather" || json.Unmarshal([]byte(tc.Function.Arguments), &args) != nil || args.City != "Moscow" {
			t.Fatalf("tool call: %+v", tc)
		}
		if len(finished) != 1 || finished[0].Name != "get_weather" || finished[0].Arguments != tc.Function.Arguments {
			t.Fatalf("finished tool calls: %+v", finished)
		}
	})
}
