package anthropic

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
	bi := w.walkAnthropicBlocks(content, cp)
	for bi.next() {
		bo, bp, typ := &bi.o, bi.at, bi.typ
		switch {
		case eqText(typ, "text"):
			if parts == 0 {
				start()
				held = bi.text
			} else {
				next()
				w.textPart("", bi.text)
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
	bi := w.walkAnthropicBlocks(content, cp)
	for bi.next() {
		bo, bp, typ := &bi.o, bi.at, bi.typ
		switch {
		case eqText(typ, "text"):
			ts.add(w, bi.text)
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
