package anthropic

import "strconv"

// The members each kind of OpenAI object may have (see obj).
var (
	keysChatRequest = []string{"model", "messages", "stream", "stream_options",
		"max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "stop",
		"tools", "tool_choice", "parallel_tool_calls", "user",
		// accepted only at a neutral value (see neutral)
		"n", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty",
		"logit_bias", "response_format", "store", "modalities"}
	keysChatMessage  = []string{"role", "content", "tool_call_id", "tool_calls", "refusal"}
	keysPart         = []string{"type", "text", "image_url", "refusal"}
	keysImageURL     = []string{"url", "detail"}
	keysToolCall     = []string{"id", "type", "function"}
	keysFunctionCall = []string{"name", "arguments"}
	keysFunctionTool = []string{"type", "function"}
	keysFunctionDef  = []string{"name", "description", "parameters", "strict"}
	keysType         = []string{"type"}
	keysStreamOpts   = []string{"include_usage"}
	keysName         = []string{"name"}
	keysNone         = []string{}
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
// legacy functions, ...) are an *Error naming the field; so is a request of
// more than MaxBlocks content parts and tool calls. Like ToOpenAI, it reads
// the body in place and writes the output as it walks (see translate).
func ToAnthropic(body []byte) ([]byte, error) {
	var req obj
	if err := decodeBody(&req, body, keysChatRequest); err != nil {
		return nil, err
	}
	return translate(func(w *writer) error { return w.toAnthropic(&req) })
}

// toAnthropic checks and writes the request req (see ToAnthropic).
func (w *writer) toAnthropic(req *obj) error {
	var root path
	// Fields that are accepted only at a value that asks for nothing.
	if err := neutral(req); err != nil {
		return err
	}
	if err := req.checkKeys(root, keysChatRequest...); err != nil {
		return err
	}
	model, err := req.reqStr("model", root)
	if err != nil {
		return err
	}
	maxTokens := int64(DefaultMaxTokens)
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if n, ok, err := req.integer(k, root); err != nil {
			return err
		} else if ok {
			if n < 1 {
				return errf(k, "must be at least 1")
			}
			maxTokens = n
		}
	}
	rawMsgs, ok, err := req.array("messages", root)
	if err != nil {
		return err
	}
	if !ok || isEmptyArray(rawMsgs) {
		return errf("messages", "is required")
	}

	// Keys are written in sorted order, as encoding/json writes a map.
	w.lit(`{"max_tokens":`)
	w.int(maxTokens)
	w.lit(`,"messages":[`)
	system, err := w.messagesToAnthropic(rawMsgs)
	if err != nil {
		return err
	}
	w.lit("]")

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
	stop := req.get("stop")
	if stop != nil {
		switch stop[0] {
		case '"':
		case '[':
			it := arrayElems(stop)
			for raw, ok := it.next(); ok; raw, ok = it.next() {
				if raw[0] != '"' && !isNullRaw(raw) {
					return errf("stop", "must be a string or an array of strings")
				}
			}
			if isEmptyArray(stop) {
				stop = nil
			}
		default:
			return errf("stop", "must be a string or an array of strings, not %s", kind(stop))
		}
	}
	user, hasUser, err := req.str("user", root)
	if err != nil {
		return err
	}
	stream, hasStream, err := req.boolean("stream", root)
	if err != nil {
		return err
	}
	if raw := req.get("stream_options"); raw != nil {
		// include_usage is handled by the caller (StreamToOpenAI);
		// Anthropic always reports usage.
		sp := root.key("stream_options")
		var so obj
		if err := decodeObj(&so, raw, sp, keysStreamOpts); err != nil {
			return err
		}
		if err := so.checkKeys(sp, "include_usage"); err != nil {
			return err
		}
		if _, _, err := so.boolean("include_usage", sp); err != nil {
			return err
		}
	}
	tools, _, err := req.array("tools", root)
	if err != nil {
		return err
	}
	tp := root.key("tools")
	it := arrayElems(tools)
	for i := 0; tools != nil; i++ {
		raw, ok := it.next()
		if !ok {
			break
		}
		if err := toolToAnthropic(nil, raw, tp.at(i)); err != nil {
			return err
		}
	}
	var choice anthropicChoice
	if raw := req.get("tool_choice"); raw != nil {
		if choice, err = toolChoiceToAnthropic(raw); err != nil {
			return err
		}
	}
	if par, ok, err := req.boolean("parallel_tool_calls", root); err != nil {
		return err
	} else if ok && !par {
		if choice.typ == "" {
			choice.typ = "auto"
		}
		choice.noParallel = choice.typ != "none"
	}

	if hasUser {
		w.lit(`,"metadata":{"user_id":`)
		w.str("", user)
		w.lit("}")
	}
	w.lit(`,"model":`)
	w.str("", model)
	if stop != nil {
		w.lit(`,"stop_sequences":[`)
		if stop[0] == '"' {
			w.str("", stop)
		} else {
			it, n := arrayElems(stop), 0
			for raw, ok := it.next(); ok; raw, ok = it.next() {
				w.sep(&n)
				if isNullRaw(raw) {
					w.lit(`""`)
				} else {
					w.str("", raw)
				}
			}
		}
		w.lit("]")
	}
	if hasStream {
		w.lit(`,"stream":`)
		w.bool(stream)
	}
	if system > 0 {
		w.lit(`,"system":`)
		w.systemToAnthropic(rawMsgs)
	}
	if nums[0] != nil {
		w.lit(`,"temperature":`)
		w.put(nums[0])
	}
	if choice.typ != "" {
		w.lit(`,"tool_choice":{`)
		if choice.noParallel {
			w.lit(`"disable_parallel_tool_use":true,`)
		}
		if choice.typ == "tool" {
			w.lit(`"name":`)
			w.str("", choice.name)
			w.lit(",")
		}
		w.lit(`"type":"`)
		w.lit(choice.typ)
		w.lit(`"}`)
	}
	if tools != nil && !isEmptyArray(tools) {
		w.lit(`,"tools":[`)
		it, n := arrayElems(tools), 0
		for raw, ok := it.next(); ok; raw, ok = it.next() {
			w.sep(&n)
			_ = toolToAnthropic(w, raw, tp)
		}
		w.lit("]")
	}
	if hasTopK {
		w.lit(`,"top_k":`)
		w.int(topK)
	}
	if nums[1] != nil {
		w.lit(`,"top_p":`)
		w.put(nums[1])
	}
	w.lit("}")
	return nil
}

// messagesToAnthropic checks the messages and writes all but the system and
// developer ones, whose texts it counts. A run of tool messages becomes one
// user message of tool results, which also takes the blocks of a user
// message that follows (Anthropic wants the results and what the user adds
// after them in one turn).
func (w *writer) messagesToAnthropic(rawMsgs []byte) (system int, err error) {
	mp := path{}.key("messages")
	var (
		n        int  // messages written
		turn     bool // a user message of tool results is open
		turnSize int  // blocks in it
	)
	closeTurn := func() {
		if turn {
			w.lit(`],"role":"user"}`)
			turn = false
		}
	}
	it := arrayElems(rawMsgs)
	for i := 0; ; i++ {
		raw, ok := it.next()
		if !ok {
			break
		}
		p := mp.at(i)
		var o obj
		if err := decodeObj(&o, raw, p, keysChatMessage); err != nil {
			return 0, err
		}
		role, err := o.reqStr("role", p)
		if err != nil {
			return 0, err
		}
		switch {
		case eqText(role, "system") || eqText(role, "developer"):
			if err := o.checkKeys(p, "role", "content"); err != nil {
				return 0, err
			}
			if err := w.openAITexts(&o, p, false, func([]byte) { system++ }); err != nil {
				return 0, err
			}
		case eqText(role, "user"):
			if err := o.checkKeys(p, "role", "content"); err != nil {
				return 0, err
			}
			if turn {
				if err := w.userContentToAnthropic(&o, p, &turnSize); err != nil {
					return 0, err
				}
				closeTurn()
				continue
			}
			w.sep(&n)
			w.lit(`{"content":[`)
			size := 0
			if err := w.userContentToAnthropic(&o, p, &size); err != nil {
				return 0, err
			}
			w.lit(`],"role":"user"}`)
		case eqText(role, "assistant"):
			closeTurn()
			w.sep(&n)
			if err := w.assistantToAnthropic(&o, p); err != nil {
				return 0, err
			}
		case eqText(role, "tool"):
			if err := o.checkKeys(p, "role", "content", "tool_call_id"); err != nil {
				return 0, err
			}
			id, err := o.reqStr("tool_call_id", p)
			if err != nil {
				return 0, err
			}
			if !turn {
				w.sep(&n)
				w.lit(`{"content":[`)
				turn, turnSize = true, 0
			}
			w.sep(&turnSize)
			w.lit(`{"content":`)
			var ts texts
			if err := w.openAITexts(&o, p, true, func(t []byte) { ts.add(w, t) }); err != nil {
				return 0, err
			}
			ts.end(w)
			w.lit(`,"tool_use_id":`)
			w.str("", id)
			w.lit(`,"type":"tool_result"}`)
		default:
			return 0, errf(p.key("role").String(), "role %q cannot be represented in an Anthropic request", echo(role))
		}
	}
	closeTurn()
	return system, nil
}

// systemToAnthropic writes the texts of the system and developer messages,
// already checked, as the system prompt.
func (w *writer) systemToAnthropic(rawMsgs []byte) {
	w.recount = true // counted on the first walk
	defer func() { w.recount = false }()
	var ts texts
	it := arrayElems(rawMsgs)
	for raw, ok := it.next(); ok; raw, ok = it.next() {
		var o obj
		_ = decodeObj(&o, raw, path{}, keysChatMessage)
		if role, _, _ := o.str("role", path{}); eqText(role, "system") || eqText(role, "developer") {
			_ = w.openAITexts(&o, path{}, false, func(t []byte) { ts.add(w, t) })
		}
	}
	ts.end(w)
}

// neutral checks the OpenAI fields that Anthropic cannot represent but that
// clients often send at a value asking for nothing.
func neutral(req *obj) error {
	var root path
	if n, ok, err := req.integer("n", root); err != nil {
		return err
	} else if ok && n != 1 {
		return errf("n", "only n=1 can be represented in an Anthropic request")
	}
	if b, ok, err := req.boolean("logprobs", root); err != nil {
		return err
	} else if ok && b {
		return errf("logprobs", "log probabilities cannot be represented in an Anthropic request")
	}
	if n, ok, err := req.integer("top_logprobs", root); err != nil {
		return err
	} else if ok && n != 0 {
		return errf("top_logprobs", "log probabilities cannot be represented in an Anthropic request")
	}
	for _, k := range []string{"presence_penalty", "frequency_penalty"} {
		if n, ok, err := req.number(k, root); err != nil {
			return err
		} else if ok {
			if f, _ := strconv.ParseFloat(string(n), 64); f != 0 {
				return errf(k, "penalties cannot be represented in an Anthropic request")
			}
		}
	}
	if raw := req.get("logit_bias"); raw != nil {
		var lb obj
		lp := root.key("logit_bias")
		if err := decodeObj(&lb, raw, lp, keysNone); err != nil {
			return err
		}
		if lb.checkKeys(lp) != nil {
			return errf("logit_bias", "cannot be represented in an Anthropic request")
		}
	}
	if raw := req.get("response_format"); raw != nil {
		var rf obj
		rp := root.key("response_format")
		if err := decodeObj(&rf, raw, rp, keysType); err != nil {
			return err
		}
		typ, err := rf.reqStr("type", rp)
		if err != nil {
			return err
		}
		if !eqText(typ, "text") {
			return errf("response_format.type", "response format %q cannot be represented in an Anthropic request", echo(typ))
		}
	}
	if b, ok, err := req.boolean("store", root); err != nil {
		return err
	} else if ok && b {
		return errf("store", "stored completions cannot be represented in an Anthropic request")
	}
	if mods, ok, err := req.array("modalities", root); err != nil {
		return err
	} else if ok {
		mp := root.key("modalities")
		it := arrayElems(mods)
		for i := 0; ; i++ {
			m, ok := it.next()
			if !ok {
				break
			}
			if string(m) != `"text"` {
				return errf(mp.at(i).String(), "only the text modality can be represented in an Anthropic request")
			}
		}
	}
	return nil
}

// openAITexts checks the content of a system, developer or tool message, a
// string or text parts, and hands each text (a JSON string of the body, nil
// for none) to each.
func (w *writer) openAITexts(o *obj, p path, allowEmpty bool, each func([]byte)) error {
	cp := p.key("content")
	raw := o.get("content")
	if raw == nil {
		if !allowEmpty {
			return errf(cp.String(), "is required")
		}
		each(nil)
		return nil
	}
	if raw[0] == '"' {
		each(raw)
		return nil
	}
	if raw[0] != '[' {
		return errf(cp.String(), "must be a string or an array of text parts, not %s", kind(raw))
	}
	if isEmptyArray(raw) {
		each(nil)
		return nil
	}
	it := arrayElems(raw)
	for i := 0; ; i++ {
		b, ok := it.next()
		if !ok {
			return nil
		}
		pp := cp.at(i)
		if err := w.block(pp); err != nil {
			return err
		}
		var po obj
		if err := decodeObj(&po, b, pp, keysPart); err != nil {
			return err
		}
		typ, err := po.reqStr("type", pp)
		if err != nil {
			return err
		}
		if !eqText(typ, "text") {
			return errf(pp.key("type").String(), "part type %q cannot be represented here; only text", echo(typ))
		}
		if err := po.checkKeys(pp, "type", "text"); err != nil {
			return err
		}
		t, err := po.reqStr("text", pp)
		if err != nil {
			return err
		}
		each(t)
	}
}

// userContentToAnthropic checks user content and writes it as Anthropic
// blocks, after the *n already written in the same content array.
func (w *writer) userContentToAnthropic(o *obj, p path, n *int) error {
	cp := p.key("content")
	raw := o.get("content")
	if raw == nil {
		return errf(cp.String(), "is required")
	}
	if raw[0] == '"' {
		w.sep(n)
		w.textBlock(raw)
		return nil
	}
	if raw[0] != '[' {
		return errf(cp.String(), "must be a string or an array of parts, not %s", kind(raw))
	}
	it := arrayElems(raw)
	for i := 0; ; i++ {
		b, ok := it.next()
		if !ok {
			return nil
		}
		pp := cp.at(i)
		if err := w.block(pp); err != nil {
			return err
		}
		var po obj
		if err := decodeObj(&po, b, pp, keysPart); err != nil {
			return err
		}
		typ, err := po.reqStr("type", pp)
		if err != nil {
			return err
		}
		switch {
		case eqText(typ, "text"):
			if err := po.checkKeys(pp, "type", "text"); err != nil {
				return err
			}
			t, err := po.reqStr("text", pp)
			if err != nil {
				return err
			}
			w.sep(n)
			w.textBlock(t)
		case eqText(typ, "image_url"):
			if err := po.checkKeys(pp, "type", "image_url"); err != nil {
				return err
			}
			ip := pp.key("image_url")
			iraw := po.get("image_url")
			if iraw == nil {
				return errf(ip.String(), "is required")
			}
			var io obj
			if err := decodeObj(&io, iraw, ip, keysImageURL); err != nil {
				return err
			}
			// detail is a resolution hint with no Anthropic equivalent
			// and no effect on the content; it is ignored.
			if err := io.checkKeys(ip, "url", "detail"); err != nil {
				return err
			}
			if _, _, err := io.str("detail", ip); err != nil {
				return err
			}
			url, err := io.reqStr("url", ip)
			if err != nil {
				return err
			}
			w.sep(n)
			if err := w.imageSource(url, ip.key("url")); err != nil {
				return err
			}
		default:
			return errf(pp.key("type").String(), "part type %q cannot be represented in an Anthropic request", echo(typ))
		}
	}
}

// textBlock writes {"text":s,"type":"text"}.
func (w *writer) textBlock(s []byte) { w.textPart("", s) }

// imageSource writes an image block for an image URL (a JSON string of the
// body), a data URL or an http(s) one. The URL is split where its decoded
// text splits, without decoding it.
func (w *writer) imageSource(url []byte, p path) error {
	s := url[1 : len(url)-1]
	if rest, ok := cutPrefixText(s, "data:"); ok {
		mt, data, ok := cutDataURL(rest)
		if !ok {
			return errf(p.String(), "a data URL must be of the form data:<media type>;base64,<data>")
		}
		w.lit(`{"source":{"data":"`)
		w.text(data)
		w.lit(`","media_type":"`)
		w.text(mt)
		w.lit(`","type":"base64"},"type":"image"}`)
		return nil
	}
	if _, ok := cutPrefixText(s, "https://"); ok {
		w.lit(`{"source":{"type":"url","url":`)
		w.str("", url)
		w.lit(`},"type":"image"}`)
		return nil
	}
	if _, ok := cutPrefixText(s, "http://"); ok {
		w.lit(`{"source":{"type":"url","url":`)
		w.str("", url)
		w.lit(`},"type":"image"}`)
		return nil
	}
	return errf(p.String(), "must be an http(s) URL or a base64 data URL")
}

// cutPrefixText is bytes.CutPrefix on the decoded text of s, the inside of
// a JSON string; prefix is ASCII.
func cutPrefixText(s []byte, prefix string) ([]byte, bool) {
	i := 0
	for j := 0; j < len(prefix); j++ {
		if i >= len(s) {
			return nil, false
		}
		r, n := nextRune(s, i)
		if r != rune(prefix[j]) {
			return nil, false
		}
		i += n
	}
	return s[i:], true
}

// cutDataURL splits what follows "data:" in a data URL, the inside of a
// JSON string, as <media type>;base64,<data>: the media type ends at the
// first comma of the decoded text and must be followed by ";base64" there.
// The parts are cut at rune boundaries, so each is the inside of a JSON
// string that decodes to its part of the text.
func cutDataURL(s []byte) (mt, data []byte, ok bool) {
	const suffix = ";base64"
	var starts [len(suffix)]int // where the last runes before the comma start
	runes := 0                  // runes before the comma
	for i := 0; i < len(s); {
		r, n := nextRune(s, i)
		if r == ',' {
			if runes <= len(suffix) {
				return nil, nil, false // no media type before ;base64
			}
			first := starts[runes%len(suffix)] // of the last len(suffix) runes
			if rest, ok := cutPrefixText(s[first:i], suffix); !ok || len(rest) > 0 {
				return nil, nil, false
			}
			return s[:first], s[i+n:], true
		}
		starts[runes%len(suffix)] = i
		runes++
		i += n
	}
	return nil, nil, false
}

// assistantToAnthropic checks an assistant message and writes it as text
// and tool_use blocks.
func (w *writer) assistantToAnthropic(o *obj, p path) error {
	if err := o.checkKeys(p, "role", "content", "tool_calls", "refusal"); err != nil {
		return err
	}
	w.lit(`{"content":[`)
	n := 0 // blocks written
	cp := p.key("content")
	if raw := o.get("content"); raw != nil {
		switch raw[0] {
		case '"':
			if len(raw) > 2 { // not ""
				w.sep(&n)
				w.textBlock(raw)
			}
		case '[':
			it := arrayElems(raw)
			for i := 0; ; i++ {
				b, ok := it.next()
				if !ok {
					break
				}
				pp := cp.at(i)
				if err := w.block(pp); err != nil {
					return err
				}
				var po obj
				if err := decodeObj(&po, b, pp, keysPart); err != nil {
					return err
				}
				typ, err := po.reqStr("type", pp)
				if err != nil {
					return err
				}
				var key string
				switch {
				case eqText(typ, "text"):
					key = "text"
				case eqText(typ, "refusal"):
					key = "refusal"
				default:
					return errf(pp.key("type").String(), "part type %q cannot be represented in an Anthropic assistant message", echo(typ))
				}
				if err := po.checkKeys(pp, "type", key); err != nil {
					return err
				}
				t, err := po.reqStr(key, pp)
				if err != nil {
					return err
				}
				w.sep(&n)
				w.textBlock(t)
			}
		default:
			return errf(cp.String(), "must be a string or an array of parts, not %s", kind(raw))
		}
	}
	if r, ok, err := o.str("refusal", p); err != nil {
		return err
	} else if ok && len(r) > 2 { // not ""
		w.sep(&n)
		w.textBlock(r)
	}
	calls, _, err := o.array("tool_calls", p)
	if err != nil {
		return err
	}
	tcp := p.key("tool_calls")
	it := arrayElems(calls)
	for j := 0; calls != nil; j++ {
		raw, ok := it.next()
		if !ok {
			break
		}
		tp := tcp.at(j)
		if err := w.block(tp); err != nil {
			return err
		}
		var to obj
		if err := decodeObj(&to, raw, tp, keysToolCall); err != nil {
			return err
		}
		if err := to.checkKeys(tp, "id", "type", "function"); err != nil {
			return err
		}
		if typ, ok, err := to.str("type", tp); err != nil {
			return err
		} else if ok && !eqText(typ, "function") {
			return errf(tp.key("type").String(), "tool call type %q cannot be represented in an Anthropic request", echo(typ))
		}
		id, err := to.reqStr("id", tp)
		if err != nil {
			return err
		}
		fp := tp.key("function")
		fraw := to.get("function")
		if fraw == nil {
			return errf(fp.String(), "is required")
		}
		var fo obj
		if err := decodeObj(&fo, fraw, fp, keysFunctionCall); err != nil {
			return err
		}
		if err := fo.checkKeys(fp, "name", "arguments"); err != nil {
			return err
		}
		name, err := fo.reqStr("name", fp)
		if err != nil {
			return err
		}
		args, hasArgs, err := fo.str("arguments", fp)
		if err != nil {
			return err
		}
		w.sep(&n)
		w.lit(`{"id":`)
		w.str("", id)
		w.lit(`,"input":`)
		// The arguments are checked as they are written; a request they
		// fail is refused by the counting run (see translate).
		empty, ok := true, true
		if hasArgs {
			empty, ok = w.args(args)
		}
		if !ok {
			return errf(fp.key("arguments").String(), "must be a JSON object to be represented as Anthropic tool_use input")
		}
		if empty {
			w.lit("{}")
		}
		w.lit(`,"name":`)
		w.str("", name)
		w.lit(`,"type":"tool_use"}`)
	}
	if n == 0 {
		return errf(cp.String(), "an assistant message needs content or tool_calls")
	}
	w.lit(`],"role":"assistant"}`)
	return nil
}

// toolToAnthropic checks a function tool and writes it as an Anthropic
// client tool (w nil: check only).
func toolToAnthropic(w *writer, raw []byte, p path) error {
	var o obj
	if err := decodeObj(&o, raw, p, keysFunctionTool); err != nil {
		return err
	}
	if err := o.checkKeys(p, "type", "function"); err != nil {
		return err
	}
	typ, err := o.reqStr("type", p)
	if err != nil {
		return err
	}
	if !eqText(typ, "function") {
		return errf(p.key("type").String(), "tool type %q cannot be represented in an Anthropic request", echo(typ))
	}
	fp := p.key("function")
	fraw := o.get("function")
	if fraw == nil {
		return errf(fp.String(), "is required")
	}
	var fo obj
	if err := decodeObj(&fo, fraw, fp, keysFunctionDef); err != nil {
		return err
	}
	if err := fo.checkKeys(fp, "name", "description", "parameters", "strict"); err != nil {
		return err
	}
	if s, ok, err := fo.boolean("strict", fp); err != nil {
		return err
	} else if ok && s {
		return errf(fp.key("strict").String(), "strict schema adherence cannot be represented in an Anthropic request")
	}
	name, err := fo.reqStr("name", fp)
	if err != nil {
		return err
	}
	desc, hasDesc, err := fo.str("description", fp)
	if err != nil {
		return err
	}
	params := fo.get("parameters")
	if params != nil && params[0] != '{' {
		return errf(fp.key("parameters").String(), "must be an object, not %s", kind(params))
	}
	if w == nil {
		return nil
	}
	w.lit("{")
	if hasDesc {
		w.lit(`"description":`)
		w.str("", desc)
		w.lit(",")
	}
	w.lit(`"input_schema":`)
	if params == nil {
		w.lit(`{"type":"object","properties":{}}`)
	} else {
		w.compact(params)
	}
	w.lit(`,"name":`)
	w.str("", name)
	w.lit("}")
	return nil
}

// anthropicChoice is a checked OpenAI tool_choice: typ is the Anthropic
// type (auto, any, none, tool), name a JSON string of the body.
type anthropicChoice struct {
	typ        string
	name       []byte
	noParallel bool
}

func toolChoiceToAnthropic(raw []byte) (anthropicChoice, error) {
	var c anthropicChoice
	p := path{}.key("tool_choice")
	if raw[0] == '"' {
		switch {
		case eqText(raw, "auto"):
			c.typ = "auto"
		case eqText(raw, "required"):
			c.typ = "any"
		case eqText(raw, "none"):
			c.typ = "none"
		default:
			return c, errf("tool_choice", "unknown tool_choice %q", echo(raw))
		}
		return c, nil
	}
	var o obj
	if err := decodeObj(&o, raw, p, keysFunctionTool); err != nil {
		return c, err
	}
	if err := o.checkKeys(p, "type", "function"); err != nil {
		return c, err
	}
	typ, err := o.reqStr("type", p)
	if err != nil {
		return c, err
	}
	if !eqText(typ, "function") {
		return c, errf(p.key("type").String(), "tool_choice type %q cannot be represented in an Anthropic request", echo(typ))
	}
	fp := p.key("function")
	fraw := o.get("function")
	if fraw == nil {
		return c, errf(fp.String(), "is required")
	}
	var fo obj
	if err := decodeObj(&fo, fraw, fp, keysName); err != nil {
		return c, err
	}
	if err := fo.checkKeys(fp, "name"); err != nil {
		return c, err
	}
	if c.name, err = fo.reqStr("name", fp); err != nil {
		return c, err
	}
	c.typ = "tool"
	return c, nil
}
