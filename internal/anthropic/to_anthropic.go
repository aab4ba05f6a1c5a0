package anthropic

import (
	"encoding/json"
	"strings"
)

// ToAnthropic translates an OpenAI chat.completions request body into an
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
func ToAnthropic(body []byte) ([]byte, error) {
	req, err := decodeObj(body, "")
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Field = "body"
		}
		return nil, err
	}
	// Fields that are accepted only at a value that asks for nothing.
	if err := neutral(req); err != nil {
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
		p := index("messages", i)
		o, err := decodeObj(raw, p)
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
			texts, err := openAITexts(o, p, false)
			if err != nil {
				return nil, err
			}
			system = append(system, texts...)
		case "user":
			if err := o.checkKeys(p, "role", "content"); err != nil {
				return nil, err
			}
			blocks, err := userContentToAnthropic(o, p)
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
			m, err := assistantToAnthropic(o, p)
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
			texts, err := openAITexts(o, p, true)
			if err != nil {
				return nil, err
			}
			res := map[string]any{"type": "tool_result", "tool_use_id": id, "content": textContent(texts)}
			if toolTurn == nil {
				toolTurn = map[string]any{"role": "user", "content": []any{}}
				msgs = append(msgs, toolTurn)
			}
			toolTurn["content"] = append(toolTurn["content"].([]any), res)
		default:
			return nil, errf(join(p, "role"), "role %q cannot be represented in an Anthropic request", role)
		}
	}
	out["messages"] = msgs
	if len(system) > 0 {
		out["system"] = textContent(system)
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
		so, err := decodeObj(raw, "stream_options")
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
			t, err := toolToAnthropic(raw, index("tools", i))
			if err != nil {
				return nil, err
			}
			ts = append(ts, t)
		}
		out["tools"] = ts
	}
	var choice map[string]any
	if raw, ok := req["tool_choice"]; ok {
		if choice, err = toolChoiceToAnthropic(raw); err != nil {
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

// neutral checks the OpenAI fields that Anthropic cannot represent but that
// clients often send at a value asking for nothing, and removes them.
func neutral(req obj) error {
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
		lb, err := decodeObj(raw, "logit_bias")
		if err != nil {
			return err
		}
		if len(lb) > 0 {
			return errf("logit_bias", "cannot be represented in an Anthropic request")
		}
	}
	if raw, ok := req["response_format"]; ok {
		rf, err := decodeObj(raw, "response_format")
		if err != nil {
			return err
		}
		typ, err := rf.reqStr("type", "response_format")
		if err != nil {
			return err
		}
		if typ != "text" {
			return errf("response_format.type", "response format %q cannot be represented in an Anthropic request", typ)
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
				return errf(index("modalities", i), "only the text modality can be represented in an Anthropic request")
			}
		}
	}
	for _, k := range []string{"n", "logprobs", "top_logprobs", "presence_penalty",
		"frequency_penalty", "logit_bias", "response_format", "store", "modalities"} {
		delete(req, k)
	}
	return nil
}

// openAITexts returns the texts of a system, developer or tool message,
// whose content is a string or text parts.
func openAITexts(o obj, p string, allowEmpty bool) ([]string, error) {
	cp := join(p, "content")
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
		pp := index(cp, i)
		po, err := decodeObj(raw, pp)
		if err != nil {
			return nil, err
		}
		typ, err := po.reqStr("type", pp)
		if err != nil {
			return nil, err
		}
		if typ != "text" {
			return nil, errf(join(pp, "type"), "part type %q cannot be represented here; only text", typ)
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

// userContentToAnthropic maps user content to Anthropic blocks.
func userContentToAnthropic(o obj, p string) ([]any, error) {
	cp := join(p, "content")
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
		pp := index(cp, i)
		po, err := decodeObj(raw, pp)
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
			ip := join(pp, "image_url")
			iraw, ok := po["image_url"]
			if !ok {
				return nil, errf(ip, "is required")
			}
			io, err := decodeObj(iraw, ip)
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
			src, err := imageSource(url, join(ip, "url"))
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, map[string]any{"type": "image", "source": src})
		default:
			return nil, errf(join(pp, "type"), "part type %q cannot be represented in an Anthropic request", typ)
		}
	}
	return blocks, nil
}

// imageSource maps an image URL, a data URL or an http(s) one, to an
// Anthropic image source.
func imageSource(url, p string) (map[string]any, error) {
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

// assistantToAnthropic maps an assistant message to text and tool_use
// blocks.
func assistantToAnthropic(o obj, p string) (map[string]any, error) {
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
				return nil, errf(join(p, "content"), "must be a string or an array of parts, not %s", kind(raw))
			}
			for i, raw := range parts {
				pp := index(join(p, "content"), i)
				po, err := decodeObj(raw, pp)
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
					return nil, errf(join(pp, "type"), "part type %q cannot be represented in an Anthropic assistant message", typ)
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
		tp := index(join(p, "tool_calls"), j)
		to, err := decodeObj(raw, tp)
		if err != nil {
			return nil, err
		}
		if err := to.checkKeys(tp, "id", "type", "function"); err != nil {
			return nil, err
		}
		if typ, ok, err := to.str("type", tp); err != nil {
			return nil, err
		} else if ok && typ != "function" {
			return nil, errf(join(tp, "type"), "tool call type %q cannot be represented in an Anthropic request", typ)
		}
		id, err := to.reqStr("id", tp)
		if err != nil {
			return nil, err
		}
		fp := join(tp, "function")
		fraw, ok := to["function"]
		if !ok {
			return nil, errf(fp, "is required")
		}
		fo, err := decodeObj(fraw, fp)
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
				return nil, errf(join(fp, "arguments"), "must be a JSON object to be represented as Anthropic tool_use input")
			}
			input = json.RawMessage(compactJSON(json.RawMessage(args)))
		}
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": name, "input": input})
	}
	if len(blocks) == 0 {
		return nil, errf(join(p, "content"), "an assistant message needs content or tool_calls")
	}
	return map[string]any{"role": "assistant", "content": blocks}, nil
}

// toolToAnthropic maps a function tool to an Anthropic client tool.
func toolToAnthropic(raw json.RawMessage, p string) (any, error) {
	o, err := decodeObj(raw, p)
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
		return nil, errf(join(p, "type"), "tool type %q cannot be represented in an Anthropic request", typ)
	}
	fp := join(p, "function")
	fraw, ok := o["function"]
	if !ok {
		return nil, errf(fp, "is required")
	}
	fo, err := decodeObj(fraw, fp)
	if err != nil {
		return nil, err
	}
	if err := fo.checkKeys(fp, "name", "description", "parameters", "strict"); err != nil {
		return nil, err
	}
	if s, ok, err := fo.boolean("strict", fp); err != nil {
		return nil, err
	} else if ok && s {
		return nil, errf(join(fp, "strict"), "strict schema adherence cannot be represented in an Anthropic request")
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
			return nil, errf(join(fp, "parameters"), "must be an object, not %s", kind(params))
		}
		schema = json.RawMessage(compactJSON(params))
	}
	t["input_schema"] = schema
	return t, nil
}

func toolChoiceToAnthropic(raw json.RawMessage) (map[string]any, error) {
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
		return nil, errf(p, "unknown tool_choice %q", s)
	}
	o, err := decodeObj(raw, p)
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
		return nil, errf(join(p, "type"), "tool_choice type %q cannot be represented in an Anthropic request", typ)
	}
	fp := join(p, "function")
	fraw, ok := o["function"]
	if !ok {
		return nil, errf(fp, "is required")
	}
	fo, err := decodeObj(fraw, fp)
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
