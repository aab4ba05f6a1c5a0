package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Stop reason mapping. OpenAI "stop" is Anthropic "end_turn" unless the
// matched stop string is known (see stopReasonFromOpenAI).
func finishToAnthropic(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

func stopToOpenAI(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	// end_turn, stop_sequence, pause_turn
	return "stop"
}

// stopReasonFromOpenAI maps a finish reason and vLLM's stop_reason extension
// (the matched stop string, or a stop token id) to an Anthropic stop reason
// and stop sequence.
func stopReasonFromOpenAI(finish string, vllmStop json.RawMessage) (string, *string) {
	if finish == "stop" && kind(vllmStop) == "a string" {
		var s string
		if json.Unmarshal(vllmStop, &s) == nil {
			return "stop_sequence", &s
		}
	}
	return finishToAnthropic(finish), nil
}

type openAIUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type openAIToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type openAIChoice struct {
	Index   int `json:"index"`
	Message struct {
		Content   *string          `json:"content"`
		Refusal   *string          `json:"refusal"`
		ToolCalls []openAIToolCall `json:"tool_calls"`
	} `json:"message"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
}

type openAIResponse struct {
	ID      string          `json:"id"`
	Choices []openAIChoice  `json:"choices"`
	Usage   *openAIUsage    `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

// upstreamError extracts the message of an OpenAI-style error body, "" if
// raw is not one.
func upstreamError(raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	var e struct {
		Message string `json:"message"`
	}
	if kind(raw) == "an object" && json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	if kind(raw) == "a string" {
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
	}
	return string(raw)
}

// FromOpenAIResponse translates a non-streamed OpenAI chat.completion
// response body into an Anthropic message response body. model is the model
// string to report (the client's address). Errors are upstream faults, never
// an *Error.
func FromOpenAIResponse(body []byte, model string) ([]byte, error) {
	var r openAIResponse
	if kind(body) != "an object" {
		return nil, errors.New("anthropic: upstream response is not a JSON object")
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("anthropic: decoding upstream response: %w", err)
	}
	if msg := upstreamError(r.Error); msg != "" {
		return nil, fmt.Errorf("anthropic: upstream error: %s", msg)
	}
	if len(r.Choices) == 0 {
		return nil, errors.New("anthropic: upstream response has no choices")
	}
	c := r.Choices[0]
	for _, ch := range r.Choices {
		if ch.Index == 0 {
			c = ch
			break
		}
	}
	content := []any{}
	text := ""
	if c.Message.Content != nil {
		text = *c.Message.Content
	}
	if c.Message.Refusal != nil && *c.Message.Refusal != "" {
		text += *c.Message.Refusal
	}
	if text != "" {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	for i, tc := range c.Message.ToolCalls {
		args := strings.TrimSpace(tc.Function.Arguments)
		if args == "" {
			args = "{}"
		}
		if !isJSONObject([]byte(args)) {
			return nil, fmt.Errorf("anthropic: upstream tool call %d has arguments that are not a JSON object", i)
		}
		id := tc.ID
		if id == "" {
			id = newID("toolu_")
		}
		content = append(content, map[string]any{
			"type": "tool_use", "id": id, "name": tc.Function.Name,
			"input": json.RawMessage(compactJSON(json.RawMessage(args))),
		})
	}
	stop, seq := stopReasonFromOpenAI(deref(c.FinishReason), c.StopReason)
	u := deref(r.Usage)
	id := idOr(r.ID, "msg_")
	return marshal(map[string]any{
		"id":            id,
		"type":          "message",
		"role":          "assistant",
		"model":         model,
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": seq,
		"usage":         map[string]any{"input_tokens": u.PromptTokens, "output_tokens": u.CompletionTokens},
	})
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// openAIUsageOf maps Anthropic usage to an OpenAI usage object; cached
// prompt tokens count as prompt tokens, as OpenAI counts them.
func openAIUsageOf(u anthropicUsage) map[string]any {
	in := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	m := map[string]any{
		"prompt_tokens":     in,
		"completion_tokens": u.OutputTokens,
		"total_tokens":      in + u.OutputTokens,
	}
	if u.CacheReadInputTokens > 0 {
		m["prompt_tokens_details"] = map[string]any{"cached_tokens": u.CacheReadInputTokens}
	}
	return m
}

type anthropicBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// FromAnthropicResponse translates a non-streamed Anthropic message into an
// OpenAI chat.completion body. Text blocks are concatenated into content;
// tool_use blocks become tool_calls; thinking blocks (which a translated
// request never asks for) are left out. Errors are upstream faults.
func FromAnthropicResponse(body []byte, model string) ([]byte, error) {
	var r struct {
		ID         string           `json:"id"`
		Type       string           `json:"type"`
		Content    []anthropicBlock `json:"content"`
		StopReason *string          `json:"stop_reason"`
		Usage      anthropicUsage   `json:"usage"`
		Error      json.RawMessage  `json:"error"`
	}
	if kind(body) != "an object" {
		return nil, errors.New("anthropic: upstream response is not a JSON object")
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("anthropic: decoding upstream response: %w", err)
	}
	if r.Type == "error" || !isNull(r.Error) {
		return nil, fmt.Errorf("anthropic: upstream error: %s", upstreamError(r.Error))
	}
	if r.Type != "message" {
		return nil, fmt.Errorf("anthropic: upstream response has type %q, not message", r.Type)
	}
	var text strings.Builder
	hasText := false
	calls := []any{}
	for i, b := range r.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
			hasText = true
		case "tool_use":
			args := "{}"
			if !isNull(b.Input) {
				args = compactJSON(b.Input)
			}
			calls = append(calls, map[string]any{
				"id": b.ID, "type": "function",
				"function": map[string]any{"name": b.Name, "arguments": args},
			})
		case "thinking", "redacted_thinking":
		default:
			return nil, fmt.Errorf("anthropic: upstream content block %d has type %q, which cannot be represented in an OpenAI response", i, b.Type)
		}
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	if hasText {
		msg["content"] = text.String()
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	stop := deref(r.StopReason)
	id := idOr(r.ID, "chatcmpl-")
	return marshal(map[string]any{
		"id":      id,
		"object":  "chat.completion",
		"created": now().Unix(),
		"model":   model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       msg,
			"logprobs":      nil,
			"finish_reason": stopToOpenAI(stop),
		}},
		"usage": openAIUsageOf(r.Usage),
	})
}

// deref returns *p, or the zero value for a field the upstream left out.
func deref[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}

// idOr returns the upstream's id, or a new one with prefix when it sent none.
func idOr(id, prefix string) string {
	if id == "" {
		return newID(prefix)
	}
	return id
}
