package anthropic

// The translators as they were before they read the body in place: each
// JSON object decoded into a map, the output built as maps and marshalled.
// Slow and memory-hungry, but obviously faithful; kept as the oracle that
// FuzzToOpenAIReference and FuzzToAnthropicReference compare against.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// refObj is a JSON object whose values are decoded on demand.
type refObj map[string]json.RawMessage

// refIsNull reports whether raw is absent or the JSON null.
func refIsNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

func refJoin(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func refIndex(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// refDecodeObj decodes raw as a JSON object. Keys that hold null are removed,
// so that an explicit null reads as an absent field everywhere.
func refDecodeObj(raw json.RawMessage, path string) (refObj, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' {
		return nil, errf(path, "must be an object, not %s", kind(raw))
	}
	var o refObj
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, errf(path, "invalid JSON: %v", err)
	}
	for k, v := range o {
		if refIsNull(v) {
			delete(o, k)
		}
	}
	return o, nil
}

// checkKeys rejects any key of o outside allowed, so that no field is
// dropped without a decision.
func (o refObj) checkKeys(path string, allowed ...string) error {
	var bad []string
	for k := range o {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	// Report the smallest key so that the message is deterministic.
	k := bad[0]
	for _, b := range bad[1:] {
		if b < k {
			k = b
		}
	}
	return errf(refJoin(path, refClip(k)), "is not supported by this translation")
}

// refClip is what an error message repeats of a client's value: the value,
// or its first whole runes up to maxEcho bytes followed by "...". (The
// translators before in-place reading repeated it whole, however long.)
func refClip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	i := maxEcho
	for !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

func (o refObj) has(key string) bool { _, ok := o[key]; return ok }

func (o refObj) str(key, path string) (string, bool, error) {
	raw, ok := o[key]
	if !ok {
		return "", false, nil
	}
	var s string
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false, errf(refJoin(path, key), "must be a string, not %s", kind(raw))
	}
	return s, true, nil
}

func (o refObj) reqStr(key, path string) (string, error) {
	s, ok, err := o.str(key, path)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errf(refJoin(path, key), "is required")
	}
	return s, nil
}

func (o refObj) boolean(key, path string) (bool, bool, error) {
	raw, ok := o[key]
	if !ok {
		return false, false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, false, errf(refJoin(path, key), "must be a boolean, not %s", kind(raw))
	}
	return b, true, nil
}

// number returns the raw JSON of a numeric field, validated.
func (o refObj) number(key, path string) (json.RawMessage, bool, error) {
	raw, ok := o[key]
	if !ok {
		return nil, false, nil
	}
	var f float64
	if kind(raw) != "a number" || json.Unmarshal(raw, &f) != nil {
		return nil, false, errf(refJoin(path, key), "must be a number, not %s", kind(raw))
	}
	return json.RawMessage(bytes.TrimSpace(raw)), true, nil
}

func (o refObj) integer(key, path string) (int64, bool, error) {
	raw, ok := o[key]
	if !ok {
		return 0, false, nil
	}
	var n int64
	if kind(raw) != "a number" || json.Unmarshal(raw, &n) != nil {
		return 0, false, errf(refJoin(path, key), "must be an integer, not %s", kind(raw))
	}
	return n, true, nil
}

func (o refObj) array(key, path string) ([]json.RawMessage, bool, error) {
	raw, ok := o[key]
	if !ok {
		return nil, false, nil
	}
	var a []json.RawMessage
	if kind(raw) != "an array" || json.Unmarshal(raw, &a) != nil {
		return nil, false, errf(refJoin(path, key), "must be an array, not %s", kind(raw))
	}
	return a, true, nil
}

// refToOpenAI translates an Anthropic Messages request body into an OpenAI
// chat.completions request body. model is written as given (the gateway
// rewrites it later). stream is carried over; when streaming,
// stream_options.include_usage is set so that usage can be mapped.
//
// Client mistakes and features without an OpenAI equivalent are an *Error
// naming the field.
func refToOpenAI(body []byte) ([]byte, error) {
	req, err := refDecodeObj(body, "")
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Field = "body"
		}
		return nil, err
	}
	if err := req.checkKeys("", "model", "messages", "system", "max_tokens", "metadata",
		"stop_sequences", "stream", "temperature", "top_p", "top_k", "tools", "tool_choice"); err != nil {
		return nil, err
	}
	out := map[string]any{}

	model, err := req.reqStr("model", "")
	if err != nil {
		return nil, err
	}
	out["model"] = model

	maxTokens, ok, err := req.integer("max_tokens", "")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errf("max_tokens", "is required")
	}
	if maxTokens < 1 {
		return nil, errf("max_tokens", "must be at least 1")
	}
	out["max_tokens"] = maxTokens

	var msgs []any
	if sys, ok := req["system"]; ok {
		m, err := refSystemToOpenAI(sys)
		if err != nil {
			return nil, err
		}
		if m != nil {
			msgs = append(msgs, m)
		}
	}
	rawMsgs, ok, err := req.array("messages", "")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errf("messages", "is required")
	}
	for i, raw := range rawMsgs {
		ms, err := refMessageToOpenAI(raw, refIndex("messages", i))
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, ms...)
	}
	if msgs == nil {
		msgs = []any{}
	}
	out["messages"] = msgs

	for _, k := range []string{"temperature", "top_p"} {
		if n, ok, err := req.number(k, ""); err != nil {
			return nil, err
		} else if ok {
			out[k] = n
		}
	}
	// top_k has no OpenAI field; vLLM and most OpenAI-compatible servers
	// accept it as an extension, so it is sent as is.
	if n, ok, err := req.integer("top_k", ""); err != nil {
		return nil, err
	} else if ok {
		out["top_k"] = n
	}
	if stops, ok, err := req.array("stop_sequences", ""); err != nil {
		return nil, err
	} else if ok && len(stops) > 0 {
		var ss []string
		for i, raw := range stops {
			var s string
			if kind(raw) != "a string" || json.Unmarshal(raw, &s) != nil {
				return nil, errf(refIndex("stop_sequences", i), "must be a string, not %s", kind(raw))
			}
			ss = append(ss, s)
		}
		out["stop"] = ss
	}
	if raw, ok := req["metadata"]; ok {
		md, err := refDecodeObj(raw, "metadata")
		if err != nil {
			return nil, err
		}
		if err := md.checkKeys("metadata", "user_id"); err != nil {
			return nil, err
		}
		if u, ok, err := md.str("user_id", "metadata"); err != nil {
			return nil, err
		} else if ok {
			out["user"] = u
		}
	}
	if stream, ok, err := req.boolean("stream", ""); err != nil {
		return nil, err
	} else if ok {
		out["stream"] = stream
		if stream {
			out["stream_options"] = map[string]any{"include_usage": true}
		}
	}
	if tools, ok, err := req.array("tools", ""); err != nil {
		return nil, err
	} else if ok && len(tools) > 0 {
		var ts []any
		for i, raw := range tools {
			t, err := refToolToOpenAI(raw, refIndex("tools", i))
			if err != nil {
				return nil, err
			}
			ts = append(ts, t)
		}
		out["tools"] = ts
	}
	if raw, ok := req["tool_choice"]; ok {
		if err := refToolChoiceToOpenAI(raw, out); err != nil {
			return nil, err
		}
	}
	return marshal(out)
}

// refSystemToOpenAI maps the system prompt, a string or text blocks, to one
// system message (nil for an empty one).
func refSystemToOpenAI(raw json.RawMessage) (any, error) {
	switch kind(raw) {
	case "a string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errf("system", "invalid string")
		}
		if s == "" {
			return nil, nil
		}
		return map[string]any{"role": "system", "content": s}, nil
	case "an array":
		var blocks []json.RawMessage
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return nil, errf("system", "invalid array")
		}
		if len(blocks) == 0 {
			return nil, nil
		}
		var texts []string
		for i, b := range blocks {
			p := refIndex("system", i)
			o, err := refDecodeObj(b, p)
			if err != nil {
				return nil, err
			}
			typ, err := o.reqStr("type", p)
			if err != nil {
				return nil, err
			}
			if typ != "text" {
				return nil, errf(refJoin(p, "type"), "system block type %q is not supported; only text", refClip(typ))
			}
			t, err := refTextBlock(o, p)
			if err != nil {
				return nil, err
			}
			texts = append(texts, t)
		}
		return map[string]any{"role": "system", "content": refTextContent(texts)}, nil
	}
	return nil, errf("system", "must be a string or an array of text blocks, not %s", kind(raw))
}

// refTextContent is one string for one text, text parts for several (which
// keeps the block boundaries).
func refTextContent(texts []string) any {
	if len(texts) == 1 {
		return texts[0]
	}
	parts := make([]any, 0, len(texts))
	for _, t := range texts {
		parts = append(parts, map[string]any{"type": "text", "text": t})
	}
	return parts
}

// refTextBlock checks an Anthropic text block and returns its text.
// cache_control is a caching hint with no OpenAI equivalent and no effect on
// the output; it is ignored. Citations are accepted only when empty.
func refTextBlock(o refObj, path string) (string, error) {
	if err := o.checkKeys(path, "type", "text", "cache_control", "citations"); err != nil {
		return "", err
	}
	if c, ok, err := o.array("citations", path); err != nil {
		return "", err
	} else if ok && len(c) > 0 {
		return "", errf(refJoin(path, "citations"), "citations cannot be represented in an OpenAI request")
	}
	return o.reqStr("text", path)
}

// refImageToOpenAI maps an Anthropic image block to an image_url part.
func refImageToOpenAI(o refObj, path string) (any, error) {
	if err := o.checkKeys(path, "type", "source", "cache_control"); err != nil {
		return nil, err
	}
	sp := refJoin(path, "source")
	raw, ok := o["source"]
	if !ok {
		return nil, errf(sp, "is required")
	}
	src, err := refDecodeObj(raw, sp)
	if err != nil {
		return nil, err
	}
	typ, err := src.reqStr("type", sp)
	if err != nil {
		return nil, err
	}
	var url string
	switch typ {
	case "base64":
		if err := src.checkKeys(sp, "type", "media_type", "data"); err != nil {
			return nil, err
		}
		mt, err := src.reqStr("media_type", sp)
		if err != nil {
			return nil, err
		}
		data, err := src.reqStr("data", sp)
		if err != nil {
			return nil, err
		}
		url = "data:" + mt + ";base64," + data
	case "url":
		if err := src.checkKeys(sp, "type", "url"); err != nil {
			return nil, err
		}
		if url, err = src.reqStr("url", sp); err != nil {
			return nil, err
		}
	default:
		return nil, errf(refJoin(sp, "type"), "image source type %q cannot be represented in an OpenAI request; use base64 or url", refClip(typ))
	}
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}, nil
}

// refMessageToOpenAI maps one Anthropic message to one or more OpenAI
// messages: tool_result blocks become tool messages, in order.
func refMessageToOpenAI(raw json.RawMessage, path string) ([]any, error) {
	o, err := refDecodeObj(raw, path)
	if err != nil {
		return nil, err
	}
	if err := o.checkKeys(path, "role", "content"); err != nil {
		return nil, err
	}
	role, err := o.reqStr("role", path)
	if err != nil {
		return nil, err
	}
	if role != "user" && role != "assistant" {
		return nil, errf(refJoin(path, "role"), "must be user or assistant, not %q", refClip(role))
	}
	cp := refJoin(path, "content")
	content, ok := o["content"]
	if !ok {
		return nil, errf(cp, "is required")
	}
	if kind(content) == "a string" {
		var s string
		_ = json.Unmarshal(content, &s)
		return []any{map[string]any{"role": role, "content": s}}, nil
	}
	if kind(content) != "an array" {
		return nil, errf(cp, "must be a string or an array of blocks, not %s", kind(content))
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(content, &blocks); err != nil {
		return nil, errf(cp, "invalid array")
	}
	if role == "assistant" {
		m, err := refAssistantToOpenAI(blocks, cp)
		if err != nil {
			return nil, err
		}
		return []any{m}, nil
	}

	var out []any
	var parts []any
	flush := func() {
		if len(parts) == 0 {
			return
		}
		var content any = parts
		if len(parts) == 1 {
			if p := parts[0].(map[string]any); p["type"] == "text" {
				content = p["text"]
			}
		}
		out = append(out, map[string]any{"role": "user", "content": content})
		parts = nil
	}
	for i, b := range blocks {
		bp := refIndex(cp, i)
		bo, err := refDecodeObj(b, bp)
		if err != nil {
			return nil, err
		}
		typ, err := bo.reqStr("type", bp)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "text":
			t, err := refTextBlock(bo, bp)
			if err != nil {
				return nil, err
			}
			parts = append(parts, map[string]any{"type": "text", "text": t})
		case "image":
			p, err := refImageToOpenAI(bo, bp)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case "tool_result":
			flush()
			m, err := refToolResultToOpenAI(bo, bp)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		default:
			return nil, errf(refJoin(bp, "type"), "block type %q cannot be represented in an OpenAI user message", refClip(typ))
		}
	}
	flush()
	if len(out) == 0 {
		// An empty block list stays an (empty) user message rather than
		// vanishing.
		out = append(out, map[string]any{"role": "user", "content": ""})
	}
	return out, nil
}

// refToolResultToOpenAI maps a tool_result block to a tool message.
func refToolResultToOpenAI(o refObj, path string) (any, error) {
	if err := o.checkKeys(path, "type", "tool_use_id", "content", "is_error", "cache_control"); err != nil {
		return nil, err
	}
	id, err := o.reqStr("tool_use_id", path)
	if err != nil {
		return nil, err
	}
	isErr, _, err := o.boolean("is_error", path)
	if err != nil {
		return nil, err
	}
	var texts []string
	if raw, ok := o["content"]; ok {
		cp := refJoin(path, "content")
		switch kind(raw) {
		case "a string":
			var s string
			_ = json.Unmarshal(raw, &s)
			texts = append(texts, s)
		case "an array":
			var blocks []json.RawMessage
			if err := json.Unmarshal(raw, &blocks); err != nil {
				return nil, errf(cp, "invalid array")
			}
			for i, b := range blocks {
				bp := refIndex(cp, i)
				bo, err := refDecodeObj(b, bp)
				if err != nil {
					return nil, err
				}
				typ, err := bo.reqStr("type", bp)
				if err != nil {
					return nil, err
				}
				if typ != "text" {
					return nil, errf(refJoin(bp, "type"), "block type %q cannot be represented in an OpenAI tool message; only text", refClip(typ))
				}
				t, err := refTextBlock(bo, bp)
				if err != nil {
					return nil, err
				}
				texts = append(texts, t)
			}
		default:
			return nil, errf(cp, "must be a string or an array of blocks, not %s", kind(raw))
		}
	}
	// OpenAI has no error flag on tool results: say it in the text.
	if isErr {
		if len(texts) == 0 {
			texts = []string{"Error"}
		} else {
			texts[0] = "Error: " + texts[0]
		}
	}
	var content any = ""
	if len(texts) > 0 {
		content = refTextContent(texts)
	}
	return map[string]any{"role": "tool", "tool_call_id": id, "content": content}, nil
}

// refAssistantToOpenAI maps assistant blocks: text to content, tool_use to
// tool_calls. OpenAI keeps text before tool calls, so text after a tool_use
// block moves ahead of it.
func refAssistantToOpenAI(blocks []json.RawMessage, cp string) (any, error) {
	var texts []string
	var calls []any
	for i, b := range blocks {
		bp := refIndex(cp, i)
		bo, err := refDecodeObj(b, bp)
		if err != nil {
			return nil, err
		}
		typ, err := bo.reqStr("type", bp)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "text":
			t, err := refTextBlock(bo, bp)
			if err != nil {
				return nil, err
			}
			texts = append(texts, t)
		case "tool_use":
			if err := bo.checkKeys(bp, "type", "id", "name", "input", "cache_control"); err != nil {
				return nil, err
			}
			id, err := bo.reqStr("id", bp)
			if err != nil {
				return nil, err
			}
			name, err := bo.reqStr("name", bp)
			if err != nil {
				return nil, err
			}
			args := "{}"
			if in, ok := bo["input"]; ok {
				if kind(in) != "an object" || !json.Valid(in) {
					return nil, errf(refJoin(bp, "input"), "must be an object, not %s", kind(in))
				}
				args = compactJSON(in)
			}
			calls = append(calls, map[string]any{
				"id": id, "type": "function",
				"function": map[string]any{"name": name, "arguments": args},
			})
		default:
			return nil, errf(refJoin(bp, "type"), "block type %q cannot be represented in an OpenAI assistant message", refClip(typ))
		}
	}
	m := map[string]any{"role": "assistant"}
	switch {
	case len(texts) > 0:
		m["content"] = refTextContent(texts)
	case len(calls) > 0:
		m["content"] = nil
	default:
		m["content"] = ""
	}
	if len(calls) > 0 {
		m["tool_calls"] = calls
	}
	return m, nil
}

// refToolToOpenAI maps a client tool definition to a function tool. Anthropic
// server tools (web search, bash, ...) have no OpenAI equivalent.
func refToolToOpenAI(raw json.RawMessage, path string) (any, error) {
	o, err := refDecodeObj(raw, path)
	if err != nil {
		return nil, err
	}
	if typ, ok, err := o.str("type", path); err != nil {
		return nil, err
	} else if ok && typ != "custom" {
		return nil, errf(refJoin(path, "type"), "tool type %q cannot be represented in an OpenAI request; only client tools", refClip(typ))
	}
	if err := o.checkKeys(path, "type", "name", "description", "input_schema", "cache_control"); err != nil {
		return nil, err
	}
	name, err := o.reqStr("name", path)
	if err != nil {
		return nil, err
	}
	fn := map[string]any{"name": name}
	if d, ok, err := o.str("description", path); err != nil {
		return nil, err
	} else if ok {
		fn["description"] = d
	}
	schema, ok := o["input_schema"]
	if !ok {
		return nil, errf(refJoin(path, "input_schema"), "is required")
	}
	if kind(schema) != "an object" || !json.Valid(schema) {
		return nil, errf(refJoin(path, "input_schema"), "must be an object, not %s", kind(schema))
	}
	fn["parameters"] = json.RawMessage(compactJSON(schema))
	return map[string]any{"type": "function", "function": fn}, nil
}

func refToolChoiceToOpenAI(raw json.RawMessage, out map[string]any) error {
	const p = "tool_choice"
	o, err := refDecodeObj(raw, p)
	if err != nil {
		return err
	}
	if err := o.checkKeys(p, "type", "name", "disable_parallel_tool_use"); err != nil {
		return err
	}
	typ, err := o.reqStr("type", p)
	if err != nil {
		return err
	}
	switch typ {
	case "auto":
		out["tool_choice"] = "auto"
	case "any":
		out["tool_choice"] = "required"
	case "none":
		out["tool_choice"] = "none"
	case "tool":
		name, err := o.reqStr("name", p)
		if err != nil {
			return err
		}
		out["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": name}}
	default:
		return errf(refJoin(p, "type"), "unknown tool_choice type %q", refClip(typ))
	}
	if typ != "tool" && o.has("name") {
		return errf(refJoin(p, "name"), "is only allowed with type tool")
	}
	if dis, ok, err := o.boolean("disable_parallel_tool_use", p); err != nil {
		return err
	} else if ok {
		if typ == "none" {
			return errf(refJoin(p, "disable_parallel_tool_use"), "is not allowed with type none")
		}
		out["parallel_tool_calls"] = !dis
	}
	return nil
}

// refToAnthropic translates an OpenAI chat.completions request body into an
// Anthropic Messages request body.
//
// System and developer messages become the system prompt; tool messages
// become tool_result blocks in a user message; assistant tool_calls become
// tool_use blocks; image_url parts become image blocks with a base64 (data
// URL) or url source. max_tokens is required by Anthropic: it comes from
// max_completion_tokens, else max_tokens, else DefaultMaxTokens. user
// becomes metadata.user_id.
//
// Unrepresentable features (n > 1, logprobs, response_format other than
// text, seed, penalties, logit_bias, audio and file parts, strict tools,
// legacy functions, ...) are an *Error naming the field.
func refToAnthropic(body []byte) ([]byte, error) {
	req, err := refDecodeObj(body, "")
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Field = "body"
		}
		return nil, err
	}
	// Fields that are accepted only at a value that asks for nothing.
	if err := refNeutral(req); err != nil {
		return nil, err
	}
	if err := req.checkKeys("", "model", "messages", "stream", "stream_options",
		"max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "stop",
		"tools", "tool_choice", "parallel_tool_calls", "user"); err != nil {
		return nil, err
	}
	out := map[string]any{}
	model, err := req.reqStr("model", "")
	if err != nil {
		return nil, err
	}
	out["model"] = model

	maxTokens := int64(DefaultMaxTokens)
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if n, ok, err := req.integer(k, ""); err != nil {
			return nil, err
		} else if ok {
			if n < 1 {
				return nil, errf(k, "must be at least 1")
			}
			maxTokens = n
		}
	}
	out["max_tokens"] = maxTokens

	rawMsgs, ok, err := req.array("messages", "")
	if err != nil {
		return nil, err
	}
	if !ok || len(rawMsgs) == 0 {
		return nil, errf("messages", "is required")
	}
	var system []string
	msgs := []map[string]any{}
	// toolTurn is the user message collecting the tool results of the
	// current run of tool messages, nil outside one.
	var toolTurn map[string]any
	for i, raw := range rawMsgs {
		p := refIndex("messages", i)
		o, err := refDecodeObj(raw, p)
		if err != nil {
			return nil, err
		}
		role, err := o.reqStr("role", p)
		if err != nil {
			return nil, err
		}
		switch role {
		case "system", "developer":
			if err := o.checkKeys(p, "role", "content"); err != nil {
				return nil, err
			}
			texts, err := refOpenAITexts(o, p, false)
			if err != nil {
				return nil, err
			}
			system = append(system, texts...)
		case "user":
			if err := o.checkKeys(p, "role", "content"); err != nil {
				return nil, err
			}
			blocks, err := refUserContentToAnthropic(o, p)
			if err != nil {
				return nil, err
			}
			if toolTurn != nil {
				// Anthropic wants the results and what the user adds
				// after them in one turn.
				toolTurn["content"] = append(toolTurn["content"].([]any), blocks...)
				toolTurn = nil
				continue
			}
			msgs = append(msgs, map[string]any{"role": "user", "content": blocks})
		case "assistant":
			toolTurn = nil
			m, err := refAssistantToAnthropic(o, p)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		case "tool":
			if err := o.checkKeys(p, "role", "content", "tool_call_id"); err != nil {
				return nil, err
			}
			id, err := o.reqStr("tool_call_id", p)
			if err != nil {
				return nil, err
			}
			texts, err := refOpenAITexts(o, p, true)
			if err != nil {
				return nil, err
			}
			res := map[string]any{"type": "tool_result", "tool_use_id": id, "content": refTextContent(texts)}
			if toolTurn == nil {
				toolTurn = map[string]any{"role": "user", "content": []any{}}
				msgs = append(msgs, toolTurn)
			}
			toolTurn["content"] = append(toolTurn["content"].([]any), res)
		default:
			return nil, errf(refJoin(p, "role"), "role %q cannot be represented in an Anthropic request", refClip(role))
		}
	}
	out["messages"] = msgs
	if len(system) > 0 {
		out["system"] = refTextContent(system)
	}

	for _, k := range []string{"temperature", "top_p"} {
		if n, ok, err := req.number(k, ""); err != nil {
			return nil, err
		} else if ok {
			out[k] = n
		}
	}
	if n, ok, err := req.integer("top_k", ""); err != nil {
		return nil, err
	} else if ok {
		out["top_k"] = n
	}
	if raw, ok := req["stop"]; ok {
		switch kind(raw) {
		case "a string":
			var s string
			_ = json.Unmarshal(raw, &s)
			out["stop_sequences"] = []string{s}
		case "an array":
			var ss []string
			if err := json.Unmarshal(raw, &ss); err != nil {
				return nil, errf("stop", "must be a string or an array of strings")
			}
			if len(ss) > 0 {
				out["stop_sequences"] = ss
			}
		default:
			return nil, errf("stop", "must be a string or an array of strings, not %s", kind(raw))
		}
	}
	if u, ok, err := req.str("user", ""); err != nil {
		return nil, err
	} else if ok {
		out["metadata"] = map[string]any{"user_id": u}
	}
	if s, ok, err := req.boolean("stream", ""); err != nil {
		return nil, err
	} else if ok {
		out["stream"] = s
	}
	if raw, ok := req["stream_options"]; ok {
		// include_usage is handled by the caller (StreamToOpenAI);
		// Anthropic always reports usage.
		so, err := refDecodeObj(raw, "stream_options")
		if err != nil {
			return nil, err
		}
		if err := so.checkKeys("stream_options", "include_usage"); err != nil {
			return nil, err
		}
		if _, _, err := so.boolean("include_usage", "stream_options"); err != nil {
			return nil, err
		}
	}
	if tools, ok, err := req.array("tools", ""); err != nil {
		return nil, err
	} else if ok && len(tools) > 0 {
		ts := []any{}
		for i, raw := range tools {
			t, err := refToolToAnthropic(raw, refIndex("tools", i))
			if err != nil {
				return nil, err
			}
			ts = append(ts, t)
		}
		out["tools"] = ts
	}
	var choice map[string]any
	if raw, ok := req["tool_choice"]; ok {
		if choice, err = refToolChoiceToAnthropic(raw); err != nil {
			return nil, err
		}
	}
	if par, ok, err := req.boolean("parallel_tool_calls", ""); err != nil {
		return nil, err
	} else if ok && !par {
		if choice == nil {
			choice = map[string]any{"type": "auto"}
		}
		if choice["type"] != "none" {
			choice["disable_parallel_tool_use"] = true
		}
	}
	if choice != nil {
		out["tool_choice"] = choice
	}
	return marshal(out)
}

// refNeutral checks the OpenAI fields that Anthropic cannot represent but that
// clients often send at a value asking for nothing, and removes them.
func refNeutral(req refObj) error {
	if n, ok, err := req.integer("n", ""); err != nil {
		return err
	} else if ok && n != 1 {
		return errf("n", "only n=1 can be represented in an Anthropic request")
	}
	if b, ok, err := req.boolean("logprobs", ""); err != nil {
		return err
	} else if ok && b {
		return errf("logprobs", "log probabilities cannot be represented in an Anthropic request")
	}
	if n, ok, err := req.integer("top_logprobs", ""); err != nil {
		return err
	} else if ok && n != 0 {
		return errf("top_logprobs", "log probabilities cannot be represented in an Anthropic request")
	}
	for _, k := range []string{"presence_penalty", "frequency_penalty"} {
		if n, ok, err := req.number(k, ""); err != nil {
			return err
		} else if ok {
			var f float64
			_ = json.Unmarshal(n, &f)
			if f != 0 {
				return errf(k, "penalties cannot be represented in an Anthropic request")
			}
		}
	}
	if raw, ok := req["logit_bias"]; ok {
		lb, err := refDecodeObj(raw, "logit_bias")
		if err != nil {
			return err
		}
		if len(lb) > 0 {
			return errf("logit_bias", "cannot be represented in an Anthropic request")
		}
	}
	if raw, ok := req["response_format"]; ok {
		rf, err := refDecodeObj(raw, "response_format")
		if err != nil {
			return err
		}
		typ, err := rf.reqStr("type", "response_format")
		if err != nil {
			return err
		}
		if typ != "text" {
			return errf("response_format.type", "response format %q cannot be represented in an Anthropic request", refClip(typ))
		}
	}
	if b, ok, err := req.boolean("store", ""); err != nil {
		return err
	} else if ok && b {
		return errf("store", "stored completions cannot be represented in an Anthropic request")
	}
	if mods, ok, err := req.array("modalities", ""); err != nil {
		return err
	} else if ok {
		for i, m := range mods {
			if string(m) != `"text"` {
				return errf(refIndex("modalities", i), "only the text modality can be represented in an Anthropic request")
			}
		}
	}
	for _, k := range []string{"n", "logprobs", "top_logprobs", "presence_penalty",
		"frequency_penalty", "logit_bias", "response_format", "store", "modalities"} {
		delete(req, k)
	}
	return nil
}

// refOpenAITexts returns the texts of a system, developer or tool message,
// whose content is a string or text parts.
func refOpenAITexts(o refObj, p string, allowEmpty bool) ([]string, error) {
	cp := refJoin(p, "content")
	raw, ok := o["content"]
	if !ok {
		if allowEmpty {
			return []string{""}, nil
		}
		return nil, errf(cp, "is required")
	}
	if kind(raw) == "a string" {
		var s string
		_ = json.Unmarshal(raw, &s)
		return []string{s}, nil
	}
	parts, ok, err := o.array("content", p)
	if err != nil || !ok {
		return nil, errf(cp, "must be a string or an array of text parts, not %s", kind(raw))
	}
	texts := []string{}
	for i, raw := range parts {
		pp := refIndex(cp, i)
		po, err := refDecodeObj(raw, pp)
		if err != nil {
			return nil, err
		}
		typ, err := po.reqStr("type", pp)
		if err != nil {
			return nil, err
		}
		if typ != "text" {
			return nil, errf(refJoin(pp, "type"), "part type %q cannot be represented here; only text", refClip(typ))
		}
		if err := po.checkKeys(pp, "type", "text"); err != nil {
			return nil, err
		}
		t, err := po.reqStr("text", pp)
		if err != nil {
			return nil, err
		}
		texts = append(texts, t)
	}
	if len(texts) == 0 {
		texts = []string{""}
	}
	return texts, nil
}

// refUserContentToAnthropic maps user content to Anthropic blocks.
func refUserContentToAnthropic(o refObj, p string) ([]any, error) {
	cp := refJoin(p, "content")
	raw, ok := o["content"]
	if !ok {
		return nil, errf(cp, "is required")
	}
	if kind(raw) == "a string" {
		var s string
		_ = json.Unmarshal(raw, &s)
		return []any{map[string]any{"type": "text", "text": s}}, nil
	}
	parts, _, err := o.array("content", p)
	if err != nil {
		return nil, errf(cp, "must be a string or an array of parts, not %s", kind(raw))
	}
	blocks := []any{}
	for i, raw := range parts {
		pp := refIndex(cp, i)
		po, err := refDecodeObj(raw, pp)
		if err != nil {
			return nil, err
		}
		typ, err := po.reqStr("type", pp)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "text":
			if err := po.checkKeys(pp, "type", "text"); err != nil {
				return nil, err
			}
			t, err := po.reqStr("text", pp)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, map[string]any{"type": "text", "text": t})
		case "image_url":
			if err := po.checkKeys(pp, "type", "image_url"); err != nil {
				return nil, err
			}
			ip := refJoin(pp, "image_url")
			iraw, ok := po["image_url"]
			if !ok {
				return nil, errf(ip, "is required")
			}
			io, err := refDecodeObj(iraw, ip)
			if err != nil {
				return nil, err
			}
			// detail is a resolution hint with no Anthropic equivalent
			// and no effect on the content; it is ignored.
			if err := io.checkKeys(ip, "url", "detail"); err != nil {
				return nil, err
			}
			if _, _, err := io.str("detail", ip); err != nil {
				return nil, err
			}
			url, err := io.reqStr("url", ip)
			if err != nil {
				return nil, err
			}
			src, err := refImageSource(url, refJoin(ip, "url"))
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, map[string]any{"type": "image", "source": src})
		default:
			return nil, errf(refJoin(pp, "type"), "part type %q cannot be represented in an Anthropic request", refClip(typ))
		}
	}
	return blocks, nil
}

// refImageSource maps an image URL, a data URL or an http(s) one, to an
// Anthropic image source.
func refImageSource(url, p string) (map[string]any, error) {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mt, isB64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isB64 || mt == "" {
			return nil, errf(p, "a data URL must be of the form data:<media type>;base64,<data>")
		}
		return map[string]any{"type": "base64", "media_type": mt, "data": data}, nil
	}
	if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
		return map[string]any{"type": "url", "url": url}, nil
	}
	return nil, errf(p, "must be an http(s) URL or a base64 data URL")
}

// refAssistantToAnthropic maps an assistant message to text and tool_use
// blocks.
func refAssistantToAnthropic(o refObj, p string) (map[string]any, error) {
	if err := o.checkKeys(p, "role", "content", "tool_calls", "refusal"); err != nil {
		return nil, err
	}
	blocks := []any{}
	if raw, ok := o["content"]; ok {
		if kind(raw) == "a string" {
			var s string
			_ = json.Unmarshal(raw, &s)
			if s != "" {
				blocks = append(blocks, map[string]any{"type": "text", "text": s})
			}
		} else {
			parts, _, err := o.array("content", p)
			if err != nil {
				return nil, errf(refJoin(p, "content"), "must be a string or an array of parts, not %s", kind(raw))
			}
			for i, raw := range parts {
				pp := refIndex(refJoin(p, "content"), i)
				po, err := refDecodeObj(raw, pp)
				if err != nil {
					return nil, err
				}
				typ, err := po.reqStr("type", pp)
				if err != nil {
					return nil, err
				}
				var key string
				switch typ {
				case "text":
					key = "text"
				case "refusal":
					key = "refusal"
				default:
					return nil, errf(refJoin(pp, "type"), "part type %q cannot be represented in an Anthropic assistant message", refClip(typ))
				}
				if err := po.checkKeys(pp, "type", key); err != nil {
					return nil, err
				}
				t, err := po.reqStr(key, pp)
				if err != nil {
					return nil, err
				}
				blocks = append(blocks, map[string]any{"type": "text", "text": t})
			}
		}
	}
	if r, ok, err := o.str("refusal", p); err != nil {
		return nil, err
	} else if ok && r != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": r})
	}
	calls, _, err := o.array("tool_calls", p)
	if err != nil {
		return nil, err
	}
	for j, raw := range calls {
		tp := refIndex(refJoin(p, "tool_calls"), j)
		to, err := refDecodeObj(raw, tp)
		if err != nil {
			return nil, err
		}
		if err := to.checkKeys(tp, "id", "type", "function"); err != nil {
			return nil, err
		}
		if typ, ok, err := to.str("type", tp); err != nil {
			return nil, err
		} else if ok && typ != "function" {
			return nil, errf(refJoin(tp, "type"), "tool call type %q cannot be represented in an Anthropic request", refClip(typ))
		}
		id, err := to.reqStr("id", tp)
		if err != nil {
			return nil, err
		}
		fp := refJoin(tp, "function")
		fraw, ok := to["function"]
		if !ok {
			return nil, errf(fp, "is required")
		}
		fo, err := refDecodeObj(fraw, fp)
		if err != nil {
			return nil, err
		}
		if err := fo.checkKeys(fp, "name", "arguments"); err != nil {
			return nil, err
		}
		name, err := fo.reqStr("name", fp)
		if err != nil {
			return nil, err
		}
		args, _, err := fo.str("arguments", fp)
		if err != nil {
			return nil, err
		}
		input := json.RawMessage("{}")
		if strings.TrimSpace(args) != "" {
			if !isJSONObject([]byte(args)) {
				return nil, errf(refJoin(fp, "arguments"), "must be a JSON object to be represented as Anthropic tool_use input")
			}
			input = json.RawMessage(compactJSON(json.RawMessage(args)))
		}
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": name, "input": input})
	}
	if len(blocks) == 0 {
		return nil, errf(refJoin(p, "content"), "an assistant message needs content or tool_calls")
	}
	return map[string]any{"role": "assistant", "content": blocks}, nil
}

// refToolToAnthropic maps a function tool to an Anthropic client tool.
func refToolToAnthropic(raw json.RawMessage, p string) (any, error) {
	o, err := refDecodeObj(raw, p)
	if err != nil {
		return nil, err
	}
	if err := o.checkKeys(p, "type", "function"); err != nil {
		return nil, err
	}
	typ, err := o.reqStr("type", p)
	if err != nil {
		return nil, err
	}
	if typ != "function" {
		return nil, errf(refJoin(p, "type"), "tool type %q cannot be represented in an Anthropic request", refClip(typ))
	}
	fp := refJoin(p, "function")
	fraw, ok := o["function"]
	if !ok {
		return nil, errf(fp, "is required")
	}
	fo, err := refDecodeObj(fraw, fp)
	if err != nil {
		return nil, err
	}
	if err := fo.checkKeys(fp, "name", "description", "parameters", "strict"); err != nil {
		return nil, err
	}
	if s, ok, err := fo.boolean("strict", fp); err != nil {
		return nil, err
	} else if ok && s {
		return nil, errf(refJoin(fp, "strict"), "strict schema adherence cannot be represented in an Anthropic request")
	}
	name, err := fo.reqStr("name", fp)
	if err != nil {
		return nil, err
	}
	t := map[string]any{"name": name}
	if d, ok, err := fo.str("description", fp); err != nil {
		return nil, err
	} else if ok {
		t["description"] = d
	}
	schema := json.RawMessage(`{"type":"object","properties":{}}`)
	if params, ok := fo["parameters"]; ok {
		if kind(params) != "an object" || !json.Valid(params) {
			return nil, errf(refJoin(fp, "parameters"), "must be an object, not %s", kind(params))
		}
		schema = json.RawMessage(compactJSON(params))
	}
	t["input_schema"] = schema
	return t, nil
}

func refToolChoiceToAnthropic(raw json.RawMessage) (map[string]any, error) {
	const p = "tool_choice"
	if kind(raw) == "a string" {
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto":
			return map[string]any{"type": "auto"}, nil
		case "required":
			return map[string]any{"type": "any"}, nil
		case "none":
			return map[string]any{"type": "none"}, nil
		}
		return nil, errf(p, "unknown tool_choice %q", refClip(s))
	}
	o, err := refDecodeObj(raw, p)
	if err != nil {
		return nil, err
	}
	if err := o.checkKeys(p, "type", "function"); err != nil {
		return nil, err
	}
	typ, err := o.reqStr("type", p)
	if err != nil {
		return nil, err
	}
	if typ != "function" {
		return nil, errf(refJoin(p, "type"), "tool_choice type %q cannot be represented in an Anthropic request", refClip(typ))
	}
	fp := refJoin(p, "function")
	fraw, ok := o["function"]
	if !ok {
		return nil, errf(fp, "is required")
	}
	fo, err := refDecodeObj(fraw, fp)
	if err != nil {
		return nil, err
	}
	if err := fo.checkKeys(fp, "name"); err != nil {
		return nil, err
	}
	name, err := fo.reqStr("name", fp)
	if err != nil {
		return nil, err
	}
	return map[string]any{"type": "tool", "name": name}, nil
}

// sameTranslation checks that got (the in-place translator's result) is
// byte for byte what the reference produced, error field and message
// included, with one exception: where the reference escaped invalid UTF-8
// of a tool input as \ufffd (6 bytes), the translator writes U+FFFD itself
// (3 bytes), so when the reference's output holds \ufffd the two must only
// decode to equal values. It also checks that the counting run sized the
// output exactly.
func sameTranslation(t *testing.T, body, got []byte, gotErr error, want []byte, wantErr error) {
	t.Helper()
	var we, ge *Error
	if wantErr != nil && !errors.As(wantErr, &we) {
		return // the reference failed to marshal its own output: no oracle
	}
	if errors.As(gotErr, &ge) && ge.Code == CodeTooManyBlocks {
		return // the reference has no cap
	}
	switch {
	case (wantErr == nil) != (gotErr == nil):
		t.Fatalf("%s\nerr = %v, reference err = %v", body, gotErr, wantErr)
	case wantErr != nil:
		if !errors.As(gotErr, &ge) || ge.Field != we.Field || ge.Message != we.Message {
			t.Fatalf("%s\nerr = %#v, reference err = %#v", body, gotErr, we)
		}
	case len(got) != cap(got):
		t.Fatalf("%s\noutput of %d bytes in a buffer of %d", body, len(got), cap(got))
	case bytes.Equal(got, want):
	case !bytes.Contains(want, []byte(`\ufffd`)) || !sameJSON(got, want):
		t.Fatalf("%s\n got: %s\nwant: %s", body, got, want)
	}
}

// sameJSON reports whether a and b decode to equal values.
func sameJSON(a, b []byte) bool {
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

func FuzzToOpenAIReference(f *testing.F) {
	seeds(f, "anthropic_client", func(g *golden) []byte { return g.Request })
	for _, s := range referenceSeedsToOpenAI {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := ToOpenAI(body)
		want, werr := refToOpenAI(body)
		sameTranslation(t, body, got, err, want, werr)
	})
}

func FuzzToAnthropicReference(f *testing.F) {
	seeds(f, "openai_client", func(g *golden) []byte { return g.Request })
	for _, s := range referenceSeedsToAnthropic {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := ToAnthropic(body)
		want, werr := refToAnthropic(body)
		sameTranslation(t, body, got, err, want, werr)
	})
}

// Seeds for the corners of reading in place: escapes, repeated and nulled
// keys, invalid UTF-8, U+2028, space everywhere; values long enough to be
// clipped in errors; tool arguments and data URLs read without decoding.
var referenceSeedsToOpenAI = []string{
	`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","is_error":true}]}]}`,
	` { "model" : "m\u00e9\"\\\/\b\f\n\r\t\u0001\ud83d\ude00\ud800x" , "max_tokens" : 5 , "messages" : [ ] , "system" : [ { "type" : "text" , "text" : "a" } , {"type":"text","text":"b\u2028"} ] } `,
	`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QUJD"}},{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r1"},{"type":"text","text":"r2"}],"is_error":true},{"type":"text","text":"after"}]}]}`,
	`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{ "x" : [1, "\u2028 \"q\""] }},{"type":"text","text":"late"},{"type":"text","text":"later"}]}]}`,
	`{"model":"m","max_tokens":1,"messages":[],"foo":1,"foo":null,"t\u0079pe":null,"bar":null,"baz":2,"baz":null}`,
	`{"model":"m","max_tokens":1,"messages":[],"zz":1,"aa":null,"aa":3}`,
	"{\"model\":\"m\xff\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"\xe2\x80\xa9\xc3\"}]}",
	`{"model":"m","max_tokens":1,"messages":[],"tools":[{"name":"t","description":"d","input_schema":{ "type" : "object" }},{"name":"u","input_schema":{}}],"tool_choice":{"type":"tool","name":"t","disable_parallel_tool_use":true},"stop_sequences":["a","b"],"metadata":{"user_id":"u"},"stream":true,"temperature":0.5,"top_p":1e0,"top_k":3}`,
	`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[]},{"role":"assistant","content":[]},{"role":"assistant","content":"x"}],"system":""}`,
	`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{"x":"` + "\xff\xfe\xc3" + `","y":"\u2028\\\"","z":[1,{"\ud800":null}]}}]}]}`,
	`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"\u0074extéééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé\ud800xxxxxxxxxx","text":"x"}]}]}`,
	`{"model":"m","max_tokens":1,"messages":[],"k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9":1,"k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9k\u00e9z":null}`,
	`{"model":"m","max_tokens":1,"messages":[{"r\u006fle":"\u0075ser","content":[{"type":"im\u0061ge","source":{"type":"base64","media_type":"image\/png\u2028","data":"QU\u004aD\ud800\"x"}},{"type":"text","text":"\ud83d\ude00\udc00\ud800\u0041"}]}]}`,
	`{"model":"m","max_tokens":1,"messages":[{"role":"ééééééééééééééééééééééééééééééééééééééééééééééééééé","content":"x"}]}`,
	`{"model":"m","max_tokens":12345678901234567890,"messages":[]}`,
	`{"model":"m","max_tokens":-0,"messages":[]}`,
}

var referenceSeedsToAnthropic = []string{
	`{"model":"m","messages":[{"role":"tool","tool_call_id":"a","content":[]},{"role":"user","content":[]}],"parallel_tool_calls":false,"tool_choice":"none"}`,
	`{"model":"m","messages":[{"role":"system","content":"s1"},{"role":"tool","tool_call_id":"a","content":"r"},{"role":"developer","content":[{"type":"text","text":"s2"}]},{"role":"tool","tool_call_id":"b"},{"role":"user","content":[{"type":"text","text":"u"},{"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD","detail":"low"}},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"refusal","refusal":"no"}],"refusal":"r","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":" { \"a\" : 1 } "}},{"id":"d","function":{"name":"g","arguments":""}}]}],"stop":["x",null],"user":"u","stream":false,"stream_options":{"include_usage":true},"n":1,"logprobs":false,"top_logprobs":0,"presence_penalty":0,"logit_bias":{"1":null},"response_format":{"type":"text"},"store":false,"modalities":["text"],"max_completion_tokens":9,"max_tokens":3,"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{ "type" : "object" },"strict":false}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,"temperature":1,"top_p":0.1,"top_k":2}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"stop":"s","tool_choice":"required","logit_bias":{"1":1,"1":null,"2":3}}`,
	`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":" \n {\"a\":[1,-0.5e+3,0,1E2,true,false,null,\"x\\\"y\\u2028\u2028\"],\"b\":{ }, \"c\" : [ ] } \t"}}]}]}`,
	`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":01}"}}]}]}`,
	`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{} {}"}}]}]}`,
	`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":" \u000b "}}]}]}`,
	`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":\"\u0001\"}"}}]}]}`,
	`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":\"` + "\xff" + `\ud800\"}"}}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data\u003aimage\/png\u003bbase64\u002cQUJD\ud800"}},{"type":"image_url","image_url":{"url":"data:;base64,x"}},{"type":"image_url","image_url":{"url":"http\u003a//x\u2028"}}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:a,b;base64,c"}}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:x;base64;base64,y"}}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:\ud800;base64,\udc00y"}}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"\u0061uto","stop":"\ud800"}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9a\u00e9"}`,
}
