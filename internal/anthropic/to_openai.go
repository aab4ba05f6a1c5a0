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
	samp, err := checkSampling(req, root)
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
	w.rawField("temperature", samp.temperature)
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
	w.intField("top_k", samp.topK, samp.hasTopK)
	w.rawField("top_p", samp.topP)
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
