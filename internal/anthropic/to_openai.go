package anthropic

import (
	"bytes"
	"encoding/json"
)

// The members each kind of Anthropic object may have (see obj).
var (
	keysRequest    = []string{"model", "messages", "system", "max_tokens", "metadata", "stop_sequences", "stream", "temperature", "top_p", "top_k", "tools", "tool_choice"}
	keysMessage    = []string{"role", "content"}
	keysBlock      = []string{"type", "text", "cache_control", "citations", "source", "tool_use_id", "content", "is_error", "id", "name", "input"}
	keysSource     = []string{"type", "media_type", "data", "url"}
	keysMetadata   = []string{"user_id"}
	keysTool       = []string{"type", "name", "description", "input_schema", "cache_control"}
	keysToolChoice = []string{"type", "name", "disable_parallel_tool_use"}
)

// decodeBody reads body as the request object.
func decodeBody(o *obj, body []byte, keys []string) error {
	raw := bytes.TrimSpace(body)
	if len(raw) == 0 || raw[0] != '{' {
		return errf("body", "must be an object, not %s", kind(body))
	}
	if !json.Valid(body) {
		// Only the error's text is wanted: encoding/json checks the
		// whole input before it decodes anything.
		var m map[string]json.RawMessage
		return errf("body", "invalid JSON: %v", json.Unmarshal(body, &m))
	}
	return decodeObj(o, raw, path{}, keys)
}

// ToOpenAI translates an Anthropic Messages request body into an OpenAI
// chat.completions request body. model is written as given (the gateway
// rewrites it later). stream is carried over; when streaming,
// stream_options.include_usage is set so that usage can be mapped.
//
// Client mistakes and features without an OpenAI equivalent are an *Error
// naming the field; so is a request of more than MaxBlocks content blocks.
// The body is read in place and the output written as it is walked (see
// translate), so the memory used is about the size of the output, and
// nothing is allocated for the output of a request that is refused.
func ToOpenAI(body []byte) ([]byte, error) {
	return translateBody(body, keysRequest, (*writer).toOpenAI)
}

// toOpenAI checks and writes the request req (see ToOpenAI).
func (w *writer) toOpenAI(req *obj) error {
	var root path
	if err := req.checkKeys(root, keysRequest...); err != nil {
		return err
	}
	model, err := req.reqStr("model", root)
	if err != nil {
		return err
	}
	maxTokens, ok, err := req.integer("max_tokens", root)
	if err != nil {
		return err
	}
	if !ok {
		return errf("max_tokens", "is required")
	}
	if maxTokens < 1 {
		return errf("max_tokens", "must be at least 1")
	}

	// Keys are written in sorted order, as encoding/json writes a map.
	w.lit(`{"max_tokens":`)
	w.int(maxTokens)
	w.lit(`,"messages":[`)
	n := 0 // messages written
	if sys := req.get("system"); sys != nil {
		if err := w.systemToOpenAI(sys, &n); err != nil {
			return err
		}
	}
	rawMsgs, ok, err := req.array("messages", root)
	if err != nil {
		return err
	}
	if !ok {
		return errf("messages", "is required")
	}
	mp := root.key("messages")
	it := arrayElems(rawMsgs)
	for i := 0; ; i++ {
		raw, ok := it.next()
		if !ok {
			break
		}
		if err := w.messageToOpenAI(raw, mp.at(i), &n); err != nil {
			return err
		}
	}
	w.lit(`],"model":`)
	w.str("", model)

	// The other fields are checked in the order the map-based translation
	// checked them, so that a request with several mistakes is told the
	// same one, and written after.
	var nums [2][]byte // temperature, top_p
	for i, k := range []string{"temperature", "top_p"} {
		if nums[i], _, err = req.number(k, root); err != nil {
			return err
		}
	}
	topK, hasTopK, err := req.integer("top_k", root)
	if err != nil {
		return err
	}
	stops, _, err := req.array("stop_sequences", root)
	if err != nil {
		return err
	}
	sp := root.key("stop_sequences")
	it = arrayElems(stops)
	for i := 0; stops != nil; i++ {
		raw, ok := it.next()
		if !ok {
			break
		}
		if raw[0] != '"' {
			return errf(sp.at(i).String(), "must be a string, not %s", kind(raw))
		}
	}
	var user []byte
	if raw := req.get("metadata"); raw != nil {
		var md obj
		mdp := root.key("metadata")
		if err := decodeObj(&md, raw, mdp, keysMetadata); err != nil {
			return err
		}
		if err := md.checkKeys(mdp, "user_id"); err != nil {
			return err
		}
		if user, _, err = md.str("user_id", mdp); err != nil {
			return err
		}
	}
	stream, hasStream, err := req.boolean("stream", root)
	if err != nil {
		return err
	}
	tools, tp, err := checkTools(req, root, toolToOpenAI)
	if err != nil {
		return err
	}
	var choice toolChoice
	if raw := req.get("tool_choice"); raw != nil {
		if choice, err = toolChoiceToOpenAI(raw); err != nil {
			return err
		}
	}

	if choice.parallel != nil {
		w.lit(`,"parallel_tool_calls":`)
		w.bool(*choice.parallel)
	}
	if stops != nil && !isEmptyArray(stops) {
		w.lit(`,"stop":[`)
		it, n := arrayElems(stops), 0
		for raw, ok := it.next(); ok; raw, ok = it.next() {
			w.sep(&n)
			w.str("", raw)
		}
		w.lit("]")
	}
	if hasStream {
		w.lit(`,"stream":`)
		w.bool(stream)
		if stream {
			w.lit(`,"stream_options":{"include_usage":true}`)
		}
	}
	w.rawField("temperature", nums[0])
	if choice.typ != "" {
		w.lit(`,"tool_choice":`)
		switch choice.typ {
		case "tool":
			w.lit(`{"function":{"name":`)
			w.str("", choice.name)
			w.lit(`},"type":"function"}`)
		default:
			w.byte('"')
			w.lit(choice.typ)
			w.byte('"')
		}
	}
	w.toolsField(tools, tp, toolToOpenAI)
	w.intField("top_k", topK, hasTopK)
	w.rawField("top_p", nums[1])
	if user != nil {
		w.lit(`,"user":`)
		w.str("", user)
	}
	w.lit("}")
	return nil
}

// systemToOpenAI writes the system prompt, a string or text blocks, as one
// system message (none for an empty one).
func (w *writer) systemToOpenAI(raw []byte, n *int) error {
	p := path{}.key("system")
	switch raw[0] {
	case '"':
		if len(raw) == 2 {
			return nil // ""
		}
		w.sep(n)
		w.lit(`{"content":`)
		w.str("", raw)
		w.lit(`,"role":"system"}`)
		return nil
	case '[':
		if isEmptyArray(raw) {
			return nil
		}
		w.sep(n)
		w.lit(`{"content":`)
		var ts texts
		if err := w.textOnlyBlocks(raw, p, &ts, "system block type %q is not supported; only text"); err != nil {
			return err
		}
		ts.end(w)
		w.lit(`,"role":"system"}`)
		return nil
	}
	return errf("system", "must be a string or an array of text blocks, not %s", kind(raw))
}

// textBlock checks an Anthropic text block and returns its text (a JSON
// string of the body).
// cache_control is a caching hint with no OpenAI equivalent and no effect on
// the output; it is ignored. Citations are accepted only when empty.
func textBlock(o *obj, p path) ([]byte, error) {
	if err := o.checkKeys(p, "type", "text", "cache_control", "citations"); err != nil {
		return nil, err
	}
	if c, ok, err := o.array("citations", p); err != nil {
		return nil, err
	} else if ok && !isEmptyArray(c) {
		return nil, errf(p.key("citations").String(), "citations cannot be represented in an OpenAI request")
	}
	return o.reqStr("text", p)
}

// imageToOpenAI checks an Anthropic image block and writes it as an
// image_url part (w nil: check only).
func imageToOpenAI(w *writer, o *obj, p path) error {
	if err := o.checkKeys(p, "type", "source", "cache_control"); err != nil {
		return err
	}
	sp := p.key("source")
	raw := o.get("source")
	if raw == nil {
		return errf(sp.String(), "is required")
	}
	var src obj
	if err := decodeObj(&src, raw, sp, keysSource); err != nil {
		return err
	}
	typ, err := src.reqStr("type", sp)
	if err != nil {
		return err
	}
	switch {
	case eqText(typ, "base64"):
		if err := src.checkKeys(sp, "type", "media_type", "data"); err != nil {
			return err
		}
		mt, err := src.reqStr("media_type", sp)
		if err != nil {
			return err
		}
		data, err := src.reqStr("data", sp)
		if err != nil {
			return err
		}
		w.lit(`{"image_url":{"url":"data:`)
		w.text(mt[1 : len(mt)-1])
		w.lit(`;base64,`)
		w.text(data[1 : len(data)-1])
		w.lit(`"},"type":"image_url"}`)
	case eqText(typ, "url"):
		if err := src.checkKeys(sp, "type", "url"); err != nil {
			return err
		}
		url, err := src.reqStr("url", sp)
		if err != nil {
			return err
		}
		w.lit(`{"image_url":{"url":`)
		w.str("", url)
		w.lit(`},"type":"image_url"}`)
	default:
		return errf(sp.key("type").String(), "image source type %q cannot be represented in an OpenAI request; use base64 or url", echo(typ))
	}
	return nil
}

// messageToOpenAI writes one Anthropic message as one or more OpenAI
// messages: tool_result blocks become tool messages, in order.
func (w *writer) messageToOpenAI(raw []byte, p path, n *int) error {
	var o obj
	if err := decodeObj(&o, raw, p, keysMessage); err != nil {
		return err
	}
	if err := o.checkKeys(p, "role", "content"); err != nil {
		return err
	}
	role, err := o.reqStr("role", p)
	if err != nil {
		return err
	}
	if !eqText(role, "user") && !eqText(role, "assistant") {
		return errf(p.key("role").String(), "must be user or assistant, not %q", echo(role))
	}
	cp := p.key("content")
	content := o.get("content")
	if content == nil {
		return errf(cp.String(), "is required")
	}
	if content[0] == '"' {
		w.sep(n)
		w.lit(`{"content":`)
		w.str("", content)
		w.lit(`,"role":`)
		w.str("", role)
		w.lit("}")
		return nil
	}
	if content[0] != '[' {
		return errf(cp.String(), "must be a string or an array of blocks, not %s", kind(content))
	}
	if eqText(role, "assistant") {
		w.sep(n)
		return w.assistantToOpenAI(content, cp)
	}

	// A run of text and image blocks is one user message; its content is a
	// string when the run is a single text block. The first text of a run
	// is held until the next block shows which.
	var (
		parts   int    // parts in the current run
		held    []byte // the run's first part, a text not yet written (a JSON string)
		written int    // messages written for this one
	)
	start := func() {
		w.sep(n)
		written++
		w.lit(`{"content":`)
	}
	next := func() {
		if parts == 1 && held != nil {
			w.lit("[")
			w.textPart("", held)
			held = nil
		}
		w.lit(",")
	}
	flush := func() {
		switch {
		case parts == 0:
			return
		case held != nil:
			w.str("", held)
			held = nil
		default:
			w.lit("]")
		}
		w.lit(`,"role":"user"}`)
		parts = 0
	}
	bi := w.walkBlocks(content, cp, keysBlock)
	for bi.next() {
		bo, bp, typ := &bi.o, bi.at, bi.typ
		switch {
		case eqText(typ, "text"):
			t, err := textBlock(bo, bp)
			if err != nil {
				return err
			}
			if parts == 0 {
				start()
				held = t
			} else {
				next()
				w.textPart("", t)
			}
			parts++
		case eqText(typ, "image"):
			if parts == 0 {
				start()
				w.lit("[")
			} else {
				next()
			}
			if err := imageToOpenAI(w, bo, bp); err != nil {
				return err
			}
			parts++
		case eqText(typ, "tool_result"):
			flush()
			w.sep(n)
			written++
			if err := w.toolResultToOpenAI(bo, bp); err != nil {
				return err
			}
		default:
			return errf(bp.key("type").String(), "block type %q cannot be represented in an OpenAI user message", echo(typ))
		}
	}
	if bi.err != nil {
		return bi.err
	}
	flush()
	if written == 0 {
		// An empty block list stays an (empty) user message rather than
		// vanishing.
		w.sep(n)
		w.lit(`{"content":"","role":"user"}`)
	}
	return nil
}

// toolResultToOpenAI writes a tool_result block as a tool message.
func (w *writer) toolResultToOpenAI(o *obj, p path) error {
	if err := o.checkKeys(p, "type", "tool_use_id", "content", "is_error", "cache_control"); err != nil {
		return err
	}
	id, err := o.reqStr("tool_use_id", p)
	if err != nil {
		return err
	}
	isErr, _, err := o.boolean("is_error", p)
	if err != nil {
		return err
	}
	w.lit(`{"content":`)
	// OpenAI has no error flag on tool results: say it in the text.
	var ts texts
	if isErr {
		ts.pre = "Error: "
	}
	if raw := o.get("content"); raw != nil {
		cp := p.key("content")
		switch raw[0] {
		case '"':
			ts.add(w, raw)
		case '[':
			if err := w.textOnlyBlocks(raw, cp, &ts, "block type %q cannot be represented in an OpenAI tool message; only text"); err != nil {
				return err
			}
		default:
			return errf(cp.String(), "must be a string or an array of blocks, not %s", kind(raw))
		}
	}
	if !ts.end(w) {
		if isErr {
			w.lit(`"Error"`)
		} else {
			w.lit(`""`)
		}
	}
	w.lit(`,"role":"tool","tool_call_id":`)
	w.str("", id)
	w.lit("}")
	return nil
}

// assistantToOpenAI writes assistant blocks as one message: text to
// content, tool_use to tool_calls. OpenAI keeps text before tool calls, so
// text after a tool_use block moves ahead of it: the blocks are walked once
// to check them and write the text, and once more for the calls.
func (w *writer) assistantToOpenAI(content []byte, cp path) error {
	w.lit(`{"content":`)
	var ts texts
	calls := 0
	bi := w.walkBlocks(content, cp, keysBlock)
	for bi.next() {
		bo, bp, typ := &bi.o, bi.at, bi.typ
		switch {
		case eqText(typ, "text"):
			t, err := textBlock(bo, bp)
			if err != nil {
				return err
			}
			ts.add(w, t)
		case eqText(typ, "tool_use"):
			if err := toolUseToOpenAI(nil, bo, bp); err != nil {
				return err
			}
			calls++
		default:
			return errf(bp.key("type").String(), "block type %q cannot be represented in an OpenAI assistant message", echo(typ))
		}
	}
	if bi.err != nil {
		return bi.err
	}
	switch {
	case ts.end(w):
	case calls > 0:
		w.lit("null")
	default:
		w.lit(`""`)
	}
	w.lit(`,"role":"assistant"`)
	if calls > 0 {
		w.lit(`,"tool_calls":[`)
		it, n := arrayElems(content), 0
		for b, ok := it.next(); ok; b, ok = it.next() {
			var bo obj
			_ = decodeObj(&bo, b, cp, keysBlock)
			if t, _, _ := bo.str("type", cp); eqText(t, "tool_use") {
				w.sep(&n)
				_ = toolUseToOpenAI(w, &bo, cp)
			}
		}
		w.lit("]")
	}
	w.lit("}")
	return nil
}

// toolUseToOpenAI checks a tool_use block and writes it as a tool call (w
// nil: check only).
func toolUseToOpenAI(w *writer, o *obj, p path) error {
	if err := o.checkKeys(p, "type", "id", "name", "input", "cache_control"); err != nil {
		return err
	}
	id, err := o.reqStr("id", p)
	if err != nil {
		return err
	}
	name, err := o.reqStr("name", p)
	if err != nil {
		return err
	}
	in := o.get("input")
	if in != nil && in[0] != '{' {
		return errf(p.key("input").String(), "must be an object, not %s", kind(in))
	}
	if w == nil {
		return nil
	}
	w.lit(`{"function":{"arguments":`)
	if in == nil {
		w.lit(`"{}"`)
	} else {
		w.compactStr(in)
	}
	w.lit(`,"name":`)
	w.str("", name)
	w.lit(`},"id":`)
	w.str("", id)
	w.lit(`,"type":"function"}`)
	return nil
}

// toolToOpenAI checks a client tool definition and writes it as a function
// tool (w nil: check only). Anthropic server tools (web search, bash, ...)
// have no OpenAI equivalent.
func toolToOpenAI(w *writer, raw []byte, p path) error {
	var o obj
	if err := decodeObj(&o, raw, p, keysTool); err != nil {
		return err
	}
	if typ, ok, err := o.str("type", p); err != nil {
		return err
	} else if ok && !eqText(typ, "custom") {
		return errf(p.key("type").String(), "tool type %q cannot be represented in an OpenAI request; only client tools", echo(typ))
	}
	if err := o.checkKeys(p, "type", "name", "description", "input_schema", "cache_control"); err != nil {
		return err
	}
	name, err := o.reqStr("name", p)
	if err != nil {
		return err
	}
	desc, hasDesc, err := o.str("description", p)
	if err != nil {
		return err
	}
	schema := o.get("input_schema")
	if schema == nil {
		return errf(p.key("input_schema").String(), "is required")
	}
	if schema[0] != '{' {
		return errf(p.key("input_schema").String(), "must be an object, not %s", kind(schema))
	}
	if w == nil {
		return nil
	}
	w.lit(`{"function":{`)
	if hasDesc {
		w.lit(`"description":`)
		w.str("", desc)
		w.lit(",")
	}
	w.lit(`"name":`)
	w.str("", name)
	w.lit(`,"parameters":`)
	w.compact(schema)
	w.lit(`},"type":"function"}`)
	return nil
}

// toolChoice is a checked Anthropic tool_choice: typ is the OpenAI
// tool_choice string, or "tool" for a named function (name, a JSON string
// of the body).
type toolChoice struct {
	typ      string
	name     []byte
	parallel *bool
}

func toolChoiceToOpenAI(raw []byte) (toolChoice, error) {
	var c toolChoice
	p := path{}.key("tool_choice")
	var o obj
	if err := decodeObj(&o, raw, p, keysToolChoice); err != nil {
		return c, err
	}
	if err := o.checkKeys(p, "type", "name", "disable_parallel_tool_use"); err != nil {
		return c, err
	}
	typ, err := o.reqStr("type", p)
	if err != nil {
		return c, err
	}
	switch {
	case eqText(typ, "auto"):
		c.typ = "auto"
	case eqText(typ, "any"):
		c.typ = "required"
	case eqText(typ, "none"):
		c.typ = "none"
	case eqText(typ, "tool"):
		if c.name, err = o.reqStr("name", p); err != nil {
			return c, err
		}
		c.typ = "tool"
	default:
		return c, errf(p.key("type").String(), "unknown tool_choice type %q", echo(typ))
	}
	if c.typ != "tool" && o.has("name") {
		return c, errf(p.key("name").String(), "is only allowed with type tool")
	}
	if dis, ok, err := o.boolean("disable_parallel_tool_use", p); err != nil {
		return c, err
	} else if ok {
		if c.typ == "none" {
			return c, errf(p.key("disable_parallel_tool_use").String(), "is not allowed with type none")
		}
		par := !dis
		c.parallel = &par
	}
	return c, nil
}
