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
	return translateBody(body, keysChatRequest, (*writer).toAnthropic)
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
	samp, err := checkSampling(req, root)
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
	tools, tp, err := checkTools(req, root, toolToAnthropic)
	if err != nil {
		return err
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
	w.rawField("temperature", samp.temperature)
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
	w.toolsField(tools, tp, toolToAnthropic)
	w.intField("top_k", samp.topK, samp.hasTopK)
	w.rawField("top_p", samp.topP)
	w.lit("}")
	return nil
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
