package anthropic

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
