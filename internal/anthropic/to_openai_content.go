package anthropic

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
