package anthropic

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
	bi := w.walkBlocks(raw, cp, keysPart)
	for bi.next() {
		po, pp, typ := &bi.o, bi.at, bi.typ
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
	return bi.err
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
			bi := w.walkBlocks(raw, cp, keysPart)
			for bi.next() {
				po, pp, typ := &bi.o, bi.at, bi.typ
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
			if bi.err != nil {
				return bi.err
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
