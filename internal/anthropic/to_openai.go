package anthropic

import (
	"encoding/json"
)

// ToOpenAI translates an Anthropic Messages request body into an OpenAI
// chat.completions request body. model is written as given (the gateway
// rewrites it later). stream is carried over; when streaming,
// stream_options.include_usage is set so that usage can be mapped.
//
// Client mistakes and features without an OpenAI equivalent are an *Error
// naming the field.
func ToOpenAI(body []byte) ([]byte, error) {
	req, err := decodeObj(body, "")
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
		m, err := systemToOpenAI(sys)
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
		ms, err := messageToOpenAI(raw, index("messages", i))
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
				return nil, errf(index("stop_sequences", i), "must be a string, not %s", kind(raw))
			}
			ss = append(ss, s)
		}
		out["stop"] = ss
	}
	if raw, ok := req["metadata"]; ok {
		md, err := decodeObj(raw, "metadata")
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
			t, err := toolToOpenAI(raw, index("tools", i))
			if err != nil {
				return nil, err
			}
			ts = append(ts, t)
		}
		out["tools"] = ts
	}
	if raw, ok := req["tool_choice"]; ok {
		if err := toolChoiceToOpenAI(raw, out); err != nil {
			return nil, err
		}
	}
	return marshal(out)
}

// systemToOpenAI maps the system prompt, a string or text blocks, to one
// system message (nil for an empty one).
func systemToOpenAI(raw json.RawMessage) (any, error) {
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
			p := index("system", i)
			o, err := decodeObj(b, p)
			if err != nil {
				return nil, err
			}
			typ, err := o.reqStr("type", p)
			if err != nil {
				return nil, err
			}
			if typ != "text" {
				return nil, errf(join(p, "type"), "system block type %q is not supported; only text", typ)
			}
			t, err := textBlock(o, p)
			if err != nil {
				return nil, err
			}
			texts = append(texts, t)
		}
		return map[string]any{"role": "system", "content": textContent(texts)}, nil
	}
	return nil, errf("system", "must be a string or an array of text blocks, not %s", kind(raw))
}

// textContent is one string for one text, text parts for several (which
// keeps the block boundaries).
func textContent(texts []string) any {
	if len(texts) == 1 {
		return texts[0]
	}
	parts := make([]any, 0, len(texts))
	for _, t := range texts {
		parts = append(parts, map[string]any{"type": "text", "text": t})
	}
	return parts
}

// textBlock checks an Anthropic text block and returns its text.
// cache_control is a caching hint with no OpenAI equivalent and no effect on
// the output; it is ignored. Citations are accepted only when empty.
func textBlock(o obj, path string) (string, error) {
	if err := o.checkKeys(path, "type", "text", "cache_control", "citations"); err != nil {
		return "", err
	}
	if c, ok, err := o.array("citations", path); err != nil {
		return "", err
	} else if ok && len(c) > 0 {
		return "", errf(join(path, "citations"), "citations cannot be represented in an OpenAI request")
	}
	return o.reqStr("text", path)
}

// imageToOpenAI maps an Anthropic image block to an image_url part.
func imageToOpenAI(o obj, path string) (any, error) {
	if err := o.checkKeys(path, "type", "source", "cache_control"); err != nil {
		return nil, err
	}
	sp := join(path, "source")
	raw, ok := o["source"]
	if !ok {
		return nil, errf(sp, "is required")
	}
	src, err := decodeObj(raw, sp)
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
		return nil, errf(join(sp, "type"), "image source type %q cannot be represented in an OpenAI request; use base64 or url", typ)
	}
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}, nil
}

// messageToOpenAI maps one Anthropic message to one or more OpenAI
// messages: tool_result blocks become tool messages, in order.
func messageToOpenAI(raw json.RawMessage, path string) ([]any, error) {
	o, err := decodeObj(raw, path)
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
		return nil, errf(join(path, "role"), "must be user or assistant, not %q", role)
	}
	cp := join(path, "content")
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
		m, err := assistantToOpenAI(blocks, cp)
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
		bp := index(cp, i)
		bo, err := decodeObj(b, bp)
		if err != nil {
			return nil, err
		}
		typ, err := bo.reqStr("type", bp)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "text":
			t, err := textBlock(bo, bp)
			if err != nil {
				return nil, err
			}
			parts = append(parts, map[string]any{"type": "text", "text": t})
		case "image":
			p, err := imageToOpenAI(bo, bp)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case "tool_result":
			flush()
			m, err := toolResultToOpenAI(bo, bp)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		default:
			return nil, errf(join(bp, "type"), "block type %q cannot be represented in an OpenAI user message", typ)
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

// toolResultToOpenAI maps a tool_result block to a tool message.
func toolResultToOpenAI(o obj, path string) (any, error) {
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
		cp := join(path, "content")
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
				bp := index(cp, i)
				bo, err := decodeObj(b, bp)
				if err != nil {
					return nil, err
				}
				typ, err := bo.reqStr("type", bp)
				if err != nil {
					return nil, err
				}
				if typ != "text" {
					return nil, errf(join(bp, "type"), "block type %q cannot be represented in an OpenAI tool message; only text", typ)
				}
				t, err := textBlock(bo, bp)
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
		content = textContent(texts)
	}
	return map[string]any{"role": "tool", "tool_call_id": id, "content": content}, nil
}

// assistantToOpenAI maps assistant blocks: text to content, tool_use to
// tool_calls. OpenAI keeps text before tool calls, so text after a tool_use
// block moves ahead of it.
func assistantToOpenAI(blocks []json.RawMessage, cp string) (any, error) {
	var texts []string
	var calls []any
	for i, b := range blocks {
		bp := index(cp, i)
		bo, err := decodeObj(b, bp)
		if err != nil {
			return nil, err
		}
		typ, err := bo.reqStr("type", bp)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "text":
			t, err := textBlock(bo, bp)
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
					return nil, errf(join(bp, "input"), "must be an object, not %s", kind(in))
				}
				args = compactJSON(in)
			}
			calls = append(calls, map[string]any{
				"id": id, "type": "function",
				"function": map[string]any{"name": name, "arguments": args},
			})
		default:
			return nil, errf(join(bp, "type"), "block type %q cannot be represented in an OpenAI assistant message", typ)
		}
	}
	m := map[string]any{"role": "assistant"}
	switch {
	case len(texts) > 0:
		m["content"] = textContent(texts)
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

// toolToOpenAI maps a client tool definition to a function tool. Anthropic
// server tools (web search, bash, ...) have no OpenAI equivalent.
func toolToOpenAI(raw json.RawMessage, path string) (any, error) {
	o, err := decodeObj(raw, path)
	if err != nil {
		return nil, err
	}
	if typ, ok, err := o.str("type", path); err != nil {
		return nil, err
	} else if ok && typ != "custom" {
		return nil, errf(join(path, "type"), "tool type %q cannot be represented in an OpenAI request; only client tools", typ)
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
		return nil, errf(join(path, "input_schema"), "is required")
	}
	if kind(schema) != "an object" || !json.Valid(schema) {
		return nil, errf(join(path, "input_schema"), "must be an object, not %s", kind(schema))
	}
	fn["parameters"] = json.RawMessage(compactJSON(schema))
	return map[string]any{"type": "function", "function": fn}, nil
}

func toolChoiceToOpenAI(raw json.RawMessage, out map[string]any) error {
	const p = "tool_choice"
	o, err := decodeObj(raw, p)
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
		return errf(join(p, "type"), "unknown tool_choice type %q", typ)
	}
	if typ != "tool" && o.has("name") {
		return errf(join(p, "name"), "is only allowed with type tool")
	}
	if dis, ok, err := o.boolean("disable_parallel_tool_use", p); err != nil {
		return err
	} else if ok {
		if typ == "none" {
			return errf(join(p, "disable_parallel_tool_use"), "is not allowed with type none")
		}
		out["parallel_tool_calls"] = !dis
	}
	return nil
}
