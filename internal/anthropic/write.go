package anthropic

import (
	"strconv"
	"unicode/utf8"

	"github.com/rolter/rolter/internal/jsonscan"
)

// MaxBlocks is the most content blocks one request may hold for
// translation: the elements of every content array (messages, system, tool
// results) and, in an OpenAI request, its tool calls. More is an *Error
// with Code CodeTooManyBlocks. Translation memory is linear in the body
// whatever the count; the cap bounds the work a single request can ask for.
const MaxBlocks = 100_000

// CodeTooManyBlocks is the Error.Code of a request over MaxBlocks.
const CodeTooManyBlocks = "too_many_content_blocks"

// writer is a request being written: JSON appended to one buffer, with the
// keys of every object in sorted order (as encoding/json writes a map), so
// that the output is byte for byte what the map-based translation produced.
//
// A translation runs twice (see translate): first with count set, when the
// writer only adds up the bytes it is given, then into a buffer of exactly
// that size. A request that is refused is refused by the first run, before
// anything is allocated for its output, and one that is not costs its
// output once, however far it grows from the body (invalid UTF-8 triples).
type writer struct {
	b      []byte
	n      int  // bytes counted
	count  bool // count the bytes, write none
	blocks int  // content blocks read so far, against MaxBlocks
	// recount: the input is walked again, its blocks already counted.
	recount bool
}

// translateBody decodes body, a request whose members may be any of keys,
// and translates it with write (see translate).
func translateBody(body []byte, keys []string, write func(w *writer, req *obj) error) ([]byte, error) {
	var req obj
	if err := decodeBody(&req, body, keys); err != nil {
		return nil, err
	}
	return translate(func(w *writer) error { return write(w, &req) })
}

// translate runs write to count its output, then again into a buffer of
// that size. write must be deterministic: it is given the same body twice.
func translate(write func(*writer) error) ([]byte, error) {
	c := writer{count: true}
	if err := write(&c); err != nil {
		return nil, err
	}
	w := writer{b: make([]byte, 0, c.n)}
	if err := write(&w); err != nil {
		return nil, err // not reached: the first run succeeded
	}
	return w.b, nil
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

func (w *writer) put(s []byte) {
	if w.count {
		w.n += len(s)
		return
	}
	w.b = append(w.b, s...)
}

func (w *writer) lit(s string) {
	if w.count {
		w.n += len(s)
		return
	}
	w.b = append(w.b, s...)
}

func (w *writer) byte(c byte) {
	if w.count {
		w.n++
		return
	}
	w.b = append(w.b, c)
}

func (w *writer) int(n int64) {
	var buf [20]byte
	w.put(strconv.AppendInt(buf[:0], n, 10))
}

func (w *writer) bool(v bool) {
	if v {
		w.lit("true")
	} else {
		w.lit("false")
	}
}

// str writes pre+s as a JSON string, s being a JSON string of the body
// (quotes included; nil for none): decoded and escaped again as
// encoding/json writes a decoded string (see text). pre is plain ASCII that
// needs no escaping.
func (w *writer) str(pre string, s []byte) {
	w.byte('"')
	w.lit(pre)
	if s != nil {
		w.text(s[1 : len(s)-1])
	}
	w.byte('"')
}

// text writes s, the inside of a JSON string of the body, as encoding/json
// writes the string it decodes to, without HTML escaping: the runes are
// decoded one at a time (see jsonscan.DecodeRune) and quote, backslash, control
// characters, U+2028 and U+2029 escaped. Runs that need neither decoding
// nor escaping, the common case, are copied whole.
func (w *writer) text(s []byte) {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '\\' {
			i++ // '"' is never bare inside a JSON string
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(s[i:])
			if (r != utf8.RuneError || n > 1) && r != '\u2028' && r != '\u2029' {
				i += n
				continue
			}
		}
		w.put(s[start:i])
		r, n := jsonscan.DecodeRune(s, i)
		w.rune(r)
		i += n
		start = i
	}
	w.put(s[start:])
}

// rune writes r as encoding/json writes it inside a string.
func (w *writer) rune(r rune) {
	const hex = "0123456789abcdef"
	switch {
	case r == '"' || r == '\\':
		w.byte('\\')
		w.byte(byte(r))
	case r == '\b':
		w.lit(`\b`)
	case r == '\f':
		w.lit(`\f`)
	case r == '\n':
		w.lit(`\n`)
	case r == '\r':
		w.lit(`\r`)
	case r == '\t':
		w.lit(`\t`)
	case r < 0x20:
		w.lit(`\u00`)
		w.byte(hex[r>>4])
		w.byte(hex[r&0xF])
	case r == '\u2028' || r == '\u2029':
		w.lit(`\u202`)
		w.byte(hex[r&0xF])
	case r < utf8.RuneSelf:
		w.byte(byte(r))
	default:
		var buf [utf8.UTFMax]byte
		w.put(buf[:utf8.EncodeRune(buf[:], r)])
	}
}

// escape writes s, raw bytes of the body that are not a decoded string
// (tool input written as a string), escaped as encoding/json escapes a
// string without HTML escaping, except that invalid UTF-8 is written as
// U+FFFD itself (3 bytes) rather than as the escape \ufffd (6): the same
// string once decoded, and at most three bytes out for one in.
func (w *writer) escape(s []byte) {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		r, n := rune(c), 1
		if c >= utf8.RuneSelf {
			r, n = utf8.DecodeRune(s[i:])
			if (r != utf8.RuneError || n > 1) && r != '\u2028' && r != '\u2029' {
				i += n
				continue
			}
		}
		w.put(s[start:i])
		w.rune(r) // U+FFFD for an invalid byte
		i += n
		start = i
	}
	w.put(s[start:])
}

// compact writes the valid JSON raw without insignificant space.
func (w *writer) compact(raw []byte) {
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			j := skipStr(raw, i)
			w.put(raw[i:j])
			i = j
		default:
			j := i + 1
			for j < len(raw) && raw[j] != '"' && raw[j] != ' ' && raw[j] != '\t' && raw[j] != '\n' && raw[j] != '\r' {
				j++
			}
			w.put(raw[i:j])
			i = j
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
// pre is written ahead of the first text. Texts are JSON strings of the
// body (nil for an empty one), as writer.str takes them.
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
