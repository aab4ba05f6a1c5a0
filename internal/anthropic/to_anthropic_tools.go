package anthropic

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
