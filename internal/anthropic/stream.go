package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/rolter/rolter/internal/sse"
)

// writeErr marks a failure to write to the client, after which nothing more
// is written.
type writeErr struct{ err error }

func (e writeErr) Error() string { return "anthropic: writing to the client: " + e.err.Error() }
func (e writeErr) Unwrap() error { return e.err }

// sink writes SSE events and flushes after each.
type sink struct {
	w     io.Writer
	flush func()
	buf   bytes.Buffer
}

func (s *sink) event(name string, v any) error {
	data, err := marshal(v)
	if err != nil {
		return err
	}
	return s.raw(name, data)
}

func (s *sink) raw(name string, data []byte) error {
	s.buf.Reset()
	if name != "" {
		s.buf.WriteString("event: ")
		s.buf.WriteString(name)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteString("data: ")
	s.buf.Write(data)
	s.buf.WriteString("\n\n")
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return writeErr{err}
	}
	if s.flush != nil {
		s.flush()
	}
	return nil
}

// ---- OpenAI chunks -> Anthropic events ----

type openAIChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string          `json:"content"`
			Refusal   *string          `json:"refusal"`
			ToolCalls []openAIToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *openAIUsage    `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type toAnthropic struct {
	out     sink
	model   string
	usage   Usage
	started bool
	next    int    // index of the next content block
	open    string // kind of the open block: "", "text" or "tool"
	tools   map[int]bool
	openTC  int // OpenAI index of the open tool block
	finish  string
	stopRaw json.RawMessage
}

// ErrStreamEnded: the upstream stream ended before its terminator ([DONE]
// or message_stop).
var ErrStreamEnded = errors.New("anthropic: the upstream stream ended before its terminator")

// ErrUpstreamEvent: the upstream sent an error event in its stream.
var ErrUpstreamEvent = errors.New("anthropic: the upstream sent an error event")

// StreamToAnthropic reads an OpenAI chat.completion.chunk SSE stream from r
// and writes the equivalent Anthropic SSE event stream to w, calling flush
// after each event. It returns the usage and the first error. On an error
// (an upstream error event, a broken or early-ended stream, data it cannot
// translate, a failed write) it writes nothing more: the caller ends the
// stream in its own error contract (the gateway's endStream, the same for
// every pairing of APIs). Nothing is written before the upstream's first
// event. Error texts never hold the upstream's data or messages.
//
// Each OpenAI tool_calls[index] becomes its own tool_use block, started on
// first sight; blocks are consecutive from 0 and only one is open at a time,
// so a text block is closed before a tool block starts and a new one opened
// if text resumes. Arguments for a tool call whose block was already closed
// (by a later tool call) cannot be placed and fail the stream. message_start
// carries the input tokens if the first chunk reports usage (0 otherwise);
// the final usage is in message_delta. reasoning_content deltas are not
// forwarded.
func StreamToAnthropic(w io.Writer, flush func(), r io.Reader, model string) (Usage, error) {
	t := &toAnthropic{out: sink{w: w, flush: flush}, model: model, tools: map[int]bool{}}
	err := t.run(r)
	return t.usage, err
}

func (t *toAnthropic) run(r io.Reader) error {
	rd := sse.NewReader(r, 0)
	for {
		ev, err := nextEvent(rd)
		if err != nil {
			return err
		}
		if ev.IsDone() {
			return t.end()
		}
		if err := t.chunk(ev.Data); err != nil {
			return err
		}
	}
}

func (t *toAnthropic) start(id string) error {
	if t.started {
		return nil
	}
	t.started = true
	if id == "" {
		id = newID("msg_")
	}
	return t.out.event("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": t.model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": t.usage.InputTokens, "output_tokens": 0},
		},
	})
}

func (t *toAnthropic) closeOpen() error {
	if t.open == "" {
		return nil
	}
	if t.open == "tool" {
		t.tools[t.openTC] = true
	}
	t.open = ""
	t.next++
	return t.out.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": t.next - 1})
}

func (t *toAnthropic) chunk(data []byte) error {
	var c openAIChunk
	if kind(data) != "an object" {
		return errors.New("upstream sent a chunk that is not a JSON object")
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("upstream sent an invalid chunk: %v", err)
	}
	if upstreamError(c.Error) != "" || c.Object == "error" {
		return ErrUpstreamEvent
	}
	if c.Usage != nil {
		t.usage = Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	}
	if err := t.start(c.ID); err != nil {
		return err
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only one choice is ever requested
		}
		text := ""
		if ch.Delta.Content != nil {
			text = *ch.Delta.Content
		}
		if ch.Delta.Refusal != nil {
			text += *ch.Delta.Refusal
		}
		if text != "" {
			if t.open != "text" {
				if err := t.closeOpen(); err != nil {
					return err
				}
				t.open = "text"
				if err := t.out.event("content_block_start", map[string]any{
					"type": "content_block_start", "index": t.next,
					"content_block": map[string]any{"type": "text", "text": ""},
				}); err != nil {
					return err
				}
			}
			if err := t.out.event("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": t.next,
				"delta": map[string]any{"type": "text_delta", "text": text},
			}); err != nil {
				return err
			}
		}
		for pos, tc := range ch.Delta.ToolCalls {
			idx := pos
			if tc.Index != nil {
				idx = *tc.Index
			}
			closed, seen := t.tools[idx]
			switch {
			case !seen:
				if err := t.closeOpen(); err != nil {
					return err
				}
				id := tc.ID
				if id == "" {
					id = newID("toolu_")
				}
				t.tools[idx] = false
				t.open, t.openTC = "tool", idx
				if err := t.out.event("content_block_start", map[string]any{
					"type": "content_block_start", "index": t.next,
					"content_block": map[string]any{"type": "tool_use", "id": id, "name": tc.Function.Name, "input": map[string]any{}},
				}); err != nil {
					return err
				}
			case closed || t.open != "tool" || t.openTC != idx:
				if tc.Function.Arguments == "" {
					continue
				}
				return fmt.Errorf("upstream sent arguments for tool call %d after its block was closed", idx)
			}
			if tc.Function.Arguments != "" {
				if err := t.out.event("content_block_delta", map[string]any{
					"type": "content_block_delta", "index": t.next,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": tc.Function.Arguments},
				}); err != nil {
					return err
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			t.finish = *ch.FinishReason
			t.stopRaw = ch.StopReason
		}
	}
	return nil
}

func (t *toAnthropic) end() error {
	if err := t.start(""); err != nil {
		return err
	}
	if err := t.closeOpen(); err != nil {
		return err
	}
	stop, seq := stopReasonFromOpenAI(t.finish, t.stopRaw)
	if err := t.out.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": seq},
		"usage": map[string]any{"input_tokens": t.usage.InputTokens, "output_tokens": t.usage.OutputTokens},
	}); err != nil {
		return err
	}
	return t.out.event("message_stop", map[string]any{"type": "message_stop"})
}

// ---- Anthropic events -> OpenAI chunks ----

type toOpenAI struct {
	out          sink
	model        string
	includeUsage bool
	id           string
	created      int64
	started      bool
	blocks       map[int]int // Anthropic block index -> OpenAI tool call index, -1 for text, -2 for ignored
	nextTool     int
	stop         string
	usage        anthropicUsage
}

// StreamToOpenAI reads an Anthropic SSE stream from r and writes OpenAI
// chat.completion.chunk events to w, calling flush after each, ending with
// data: [DONE]. When includeUsage, a final chunk with empty choices carries
// the usage (and the other chunks "usage": null), as OpenAI does. On an
// error it writes nothing more, no [DONE], and returns it, as
// StreamToAnthropic does. Thinking blocks are not forwarded.
func StreamToOpenAI(w io.Writer, flush func(), r io.Reader, model string, includeUsage bool) (Usage, error) {
	t := &toOpenAI{out: sink{w: w, flush: flush}, model: model, includeUsage: includeUsage,
		created: now().Unix(), blocks: map[int]int{}}
	err := t.run(r)
	return t.result(), err
}

func (t *toOpenAI) result() Usage {
	u := t.usage
	return Usage{InputTokens: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens, OutputTokens: u.OutputTokens}
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Message struct {
		ID    string         `json:"id"`
		Usage anthropicUsage `json:"usage"`
	} `json:"message"`
	Index        *int `json:"index"`
	ContentBlock struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *struct {
		InputTokens              *int `json:"input_tokens"`
		OutputTokens             *int `json:"output_tokens"`
		CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

func (t *toOpenAI) run(r io.Reader) error {
	rd := sse.NewReader(r, 0)
	for {
		ev, err := nextEvent(rd)
		if err != nil {
			return err
		}
		var e anthropicEvent
		if kind(ev.Data) != "an object" {
			return errors.New("upstream sent an event that is not a JSON object")
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return fmt.Errorf("upstream sent an invalid event: %v", err)
		}
		done, err := t.event(&e)
		if err != nil || done {
			return err
		}
	}
}

func (t *toOpenAI) chunk(delta map[string]any, finish any) error {
	c := map[string]any{
		"id": t.id, "object": "chat.completion.chunk", "created": t.created, "model": t.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
	}
	if t.includeUsage {
		c["usage"] = nil
	}
	return t.out.event("", c)
}

func (t *toOpenAI) start(id string) error {
	if t.started {
		return nil
	}
	t.started = true
	t.id = id
	if t.id == "" {
		t.id = newID("chatcmpl-")
	}
	return t.chunk(map[string]any{"role": "assistant", "content": ""}, nil)
}

func (t *toOpenAI) event(e *anthropicEvent) (bool, error) {
	switch e.Type {
	case "ping":
		return false, nil
	case "error":
		return false, ErrUpstreamEvent
	case "message_start":
		t.usage = e.Message.Usage
		return false, t.start(e.Message.ID)
	}
	if err := t.start(""); err != nil {
		return false, err
	}
	switch e.Type {
	case "content_block_start":
		if e.Index == nil {
			return false, errors.New("upstream content_block_start has no index")
		}
		b := e.ContentBlock
		switch b.Type {
		case "text":
			t.blocks[*e.Index] = -1
			if b.Text != "" {
				return false, t.chunk(map[string]any{"content": b.Text}, nil)
			}
		case "tool_use":
			n := t.nextTool
			t.nextTool++
			t.blocks[*e.Index] = n
			args := ""
			if !isNull(b.Input) && compactJSON(b.Input) != "{}" {
				args = compactJSON(b.Input)
			}
			return false, t.chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": n, "id": b.ID, "type": "function",
				"function": map[string]any{"name": b.Name, "arguments": args},
			}}}, nil)
		case "thinking", "redacted_thinking":
			t.blocks[*e.Index] = -2
		default:
			return false, fmt.Errorf("upstream content block type %.64q cannot be represented in an OpenAI stream", b.Type)
		}
	case "content_block_delta":
		if e.Index == nil {
			return false, errors.New("upstream content_block_delta has no index")
		}
		n, ok := t.blocks[*e.Index]
		if !ok {
			return false, fmt.Errorf("upstream sent a delta for unknown content block %d", *e.Index)
		}
		switch e.Delta.Type {
		case "text_delta":
			if n != -1 {
				return false, fmt.Errorf("upstream sent a text delta for non-text block %d", *e.Index)
			}
			if e.Delta.Text != "" {
				return false, t.chunk(map[string]any{"content": e.Delta.Text}, nil)
			}
		case "input_json_delta":
			if n < 0 {
				return false, fmt.Errorf("upstream sent an input_json_delta for non-tool block %d", *e.Index)
			}
			if e.Delta.PartialJSON != "" {
				return false, t.chunk(map[string]any{"tool_calls": []any{map[string]any{
					"index": n, "function": map[string]any{"arguments": e.Delta.PartialJSON},
				}}}, nil)
			}
		case "thinking_delta", "signature_delta", "citations_delta":
		default:
			return false, fmt.Errorf("upstream delta type %.64q cannot be represented in an OpenAI stream", e.Delta.Type)
		}
	case "content_block_stop":
	case "message_delta":
		if e.Delta.StopReason != nil {
			t.stop = *e.Delta.StopReason
		}
		if u := e.Usage; u != nil {
			// message_delta usage is cumulative.
			set := func(dst *int, src *int) {
				if src != nil {
					*dst = *src
				}
			}
			set(&t.usage.InputTokens, u.InputTokens)
			set(&t.usage.OutputTokens, u.OutputTokens)
			set(&t.usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
			set(&t.usage.CacheReadInputTokens, u.CacheReadInputTokens)
		}
	case "message_stop":
		if err := t.chunk(map[string]any{}, stopToOpenAI(t.stop)); err != nil {
			return false, err
		}
		if t.includeUsage {
			if err := t.out.event("", map[string]any{
				"id": t.id, "object": "chat.completion.chunk", "created": t.created, "model": t.model,
				"choices": []any{}, "usage": openAIUsageOf(t.usage),
			}); err != nil {
				return false, err
			}
		}
		return true, t.out.raw("", []byte("[DONE]"))
	}
	// Unknown event types are ignored, as Anthropic asks of clients.
	return false, nil
}

// nextEvent reads the next event that carries data. The end of the stream
// before its last event is ErrStreamEnded.
func nextEvent(rd *sse.Reader) (sse.Event, error) {
	for {
		ev, err := rd.Next()
		if err != nil {
			if err == io.EOF {
				return ev, ErrStreamEnded
			}
			return ev, fmt.Errorf("upstream stream broken: %w", err)
		}
		if ev.Data != nil {
			return ev, nil
		}
	}
}
