package anthropic

import "github.com/rolter/rolter/internal/jsonscan"

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
	bi := w.walkBlocks(raw, cp, keysPart)
	for bi.next() {
		po, pp, typ := &bi.o, bi.at, bi.typ
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
	return bi.err
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
		r, n := jsonscan.DecodeRune(s, i)
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
		r, n := jsonscan.DecodeRune(s, i)
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
