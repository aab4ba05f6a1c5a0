package anthropic

import (
	"strconv"
	"unicode/utf8"
)

// MaxBlocks is the most content blocks one request may hold for
// translation: the elements of every content array (messages, system, tool
// results) and, in an OpenAI request, its tool calls. More is an *Error
// with Code CodeTooManyBlocks. Translation memory is linear in the body
// whatever the count; the cap bounds the work a single request can ask for.
const MaxBlocks = 100_000

// CodeTooManyBlocks is the Error.Code of a request over MaxBlocks.
const CodeTooManyBlocks = "too_many_content_blocks"

// writer is a request being written: JSON appended to one buffer sized
// from the input, with the keys of every object in sorted order (as
// encoding/json writes a map), so that the output is byte for byte what the
// map-based translation produced.
type writer struct {
	b      []byte
	blocks int // content blocks read so far, against MaxBlocks
	// recount: the input is walked again, its blocks already counted.
	recount bool
}

func newWriter(in []byte) *writer {
	// The output is about the size of the input; a little slack covers
	// the fields added (stream_options, "role":"tool") without regrowth.
	return &writer{b: make([]byte, 0, len(in)+len(in)/16+256)}
}

// block counts one content block at p against MaxBlocks.
func (w *writer) block(p path) error {
	if w.recount {
		return nil
	}
	w.blocks++
	if w.blocks > MaxBlocks {
		return &Error{Field: p.String(), Code: CodeTooManyBlocks,
			Message: "a request may hold at most " + strconv.Itoa(MaxBlocks) + " content blocks"}
	}
	return nil
}

// grow makes room for n more bytes, at least doubling, so that the bytes
// allocated over a whole translation stay within a small multiple of the
// output.
func (w *writer) grow(n int) {
	if len(w.b)+n <= cap(w.b) {
		return
	}
	b := make([]byte, len(w.b), max(2*cap(w.b), len(w.b)+n))
	copy(b, w.b)
	w.b = b
}

func (w *writer) put(s []byte) {
	w.grow(len(s))
	w.b = append(w.b, s...)
}

func (w *writer) lit(s string) {
	w.grow(len(s))
	w.b = append(w.b, s...)
}

func (w *writer) int(n int64) {
	w.grow(20)
	w.b = strconv.AppendInt(w.b, n, 10)
}

func (w *writer) bool(v bool) {
	if v {
		w.lit("true")
	} else {
		w.lit("false")
	}
}

// str writes pre+s as a JSON string; pre is plain ASCII that needs no
// escaping.
func (w *writer) str(pre string, s []byte) {
	w.lit(`"`)
	w.lit(pre)
	w.escape(s)
	w.lit(`"`)
}

// escape writes s escaped as encoding/json escapes a string without HTML
// escaping: quote, backslash and control characters, U+2028 and U+2029,
// and invalid UTF-8 as U+FFFD.
func (w *writer) escape(s []byte) {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			w.put(s[start:i])
			switch c {
			case '"', '\\':
				w.put([]byte{'\\', c})
			case '\b':
				w.lit(`\b`)
			case '\f':
				w.lit(`\f`)
			case '\n':
				w.lit(`\n`)
			case '\r':
				w.lit(`\r`)
			case '\t':
				w.lit(`\t`)
			default:
				w.put([]byte{'\\', 'u', '0', '0', hex[c>>4], hex[c&0xF]})
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			w.put(s[start:i])
			w.lit(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			w.put(s[start:i])
			w.put([]byte{'\\', 'u', '2', '0', '2', hex[r&0xF]})
		default:
			i += n
			continue
		}
		i += n
		start = i
	}
	w.put(s[start:])
}

// compact writes the valid JSON raw without insignificant space.
func (w *writer) compact(raw []byte) {
	w.grow(len(raw))
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			j := skipStr(raw, i)
			w.b = append(w.b, raw[i:j]...)
			i = j
		default:
			w.b = append(w.b, c)
			i++
		}
	}
}

// compactStr writes the valid JSON raw, compacted, as a JSON string (tool
// call arguments).
func (w *writer) compactStr(raw []byte) {
	w.lit(`"`)
	for i := 0; i < len(raw); {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			j := skipStr(raw, i)
			w.escape(raw[i:j])
			i = j
		default:
			j := i + 1
			for j < len(raw) && raw[j] != '"' && raw[j] != ' ' && raw[j] != '\t' && raw[j] != '\n' && raw[j] != '\r' {
				j++
			}
			w.escape(raw[i:j])
			i = j
		}
	}
	w.lit(`"`)
}

// texts writes a list of texts as OpenAI content or an Anthropic system
// prompt: one string for one text, text parts for several (which keeps the
// block boundaries). The first text is held until a second one shows which.
// pre is written ahead of the first text.
type texts struct {
	n     int
	first []byte
	pre   string
}

func (t *texts) add(w *writer, s []byte) {
	t.n++
	switch t.n {
	case 1:
		t.first = s
		return
	case 2:
		w.lit("[")
		w.textPart(t.pre, t.first)
	}
	w.lit(",")
	w.textPart("", s)
}

// end finishes the content; false (and nothing written) when there was no
// text.
func (t *texts) end(w *writer) bool {
	switch t.n {
	case 0:
		return false
	case 1:
		w.str(t.pre, t.first)
	default:
		w.lit("]")
	}
	return true
}

// textPart writes {"text":pre+s,"type":"text"}.
func (w *writer) textPart(pre string, s []byte) {
	w.lit(`{"text":`)
	w.str(pre, s)
	w.lit(`,"type":"text"}`)
}

// sep writes the comma before every element of a list but the first.
func (w *writer) sep(n *int) {
	if *n > 0 {
		w.lit(",")
	}
	*n++
}
