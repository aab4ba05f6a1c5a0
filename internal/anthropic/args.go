package anthropic

import (
	"unicode"
	"unicode/utf8"

	"github.com/rolter/rolter/internal/jsonscan"
)

// OpenAI tool call arguments are JSON held inside a JSON string; Anthropic
// wants the object itself. The string is read as it is decoded, one rune at
// a time, by a JSON checker that keeps no more than a bit per open bracket,
// so that arguments of any size, escapes or invalid UTF-8 are checked and
// written without being decoded into memory first.

// args checks that the JSON string raw of the body (quotes included)
// decodes to text that, trimmed of Unicode space as bytes.TrimSpace trims,
// is empty or a JSON object as json.Valid accepts it, and writes the object
// compacted (as json.Compact would, strings as decoded). It reports whether
// the text is empty (nothing written) and whether it is valid. What it
// wrote for an invalid text is to be discarded: it is only ever counted.
func (w *writer) args(raw []byte) (empty, ok bool) {
	s := raw[1 : len(raw)-1]
	var v jsonCheck
	started := false
	var buf [utf8.UTFMax]byte
	for i := 0; i < len(s); {
		r, n := jsonscan.DecodeRune(s, i)
		i += n
		if (!started || v.state == jDone) && unicode.IsSpace(r) {
			continue // trimmed
		}
		if !started {
			if r != '{' {
				return false, false
			}
			started = true
		}
		for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
			if v.state == jString || !isSpaceJSON(c) {
				w.byte(c)
			}
			if !v.feed(c) {
				return false, false
			}
		}
	}
	if !started {
		return true, true
	}
	return false, v.end()
}

// validJSON is json.Valid, by jsonCheck; its fuzz test holds the two equal.
func validJSON(b []byte) bool {
	var v jsonCheck
	for _, c := range b {
		if !v.feed(c) {
			return false
		}
	}
	return v.end()
}

func isSpaceJSON(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// maxDepth is encoding/json's limit on nesting.
const maxDepth = 10000

// jsonCheck is a JSON checker fed one byte at a time, with the grammar and
// nesting limit of encoding/json's scanner (which is not exported, and
// needs its whole input in memory).
type jsonCheck struct {
	state uint8
	key   bool   // the string being read is an object key
	hex   uint8  // hex digits read of a \u escape
	lit   string // the rest of true, false or null
	depth int
	objs  [maxDepth/64 + 1]uint64 // bit d-1: open bracket d is an object
}

const (
	jValue       uint8 = iota // a value must begin (the zero state: top level)
	jArrayFirst               // after [: a value or ]
	jObjectFirst              // after {: a key or }
	jKey                      // after , in an object: a key
	jColon                    // after a key
	jAfter                    // after a value inside brackets: , or the closer
	jString                   // inside a string
	jEscape                   // after a backslash in a string
	jHex                      // in the hex digits of \u
	jMinus                    // after a leading -
	jZero                     // after a leading 0
	jInt                      // in the integer digits
	jDot                      // after the decimal point
	jFrac                     // in the fraction digits
	jE                        // after e or E
	jESign                    // after the exponent's sign
	jExp                      // in the exponent digits
	jLiteral                  // in true, false or null
	jDone                     // after the top-level value
	jBad                      // not JSON
)

// feed reads c; false once the input cannot be JSON.
func (v *jsonCheck) feed(c byte) bool {
	switch v.state {
	case jValue, jArrayFirst:
		switch {
		case isSpaceJSON(c):
		case c == ']' && v.state == jArrayFirst:
			v.close()
		default:
			v.begin(c)
		}
	case jObjectFirst, jKey:
		switch {
		case isSpaceJSON(c):
		case c == '}' && v.state == jObjectFirst:
			v.close()
		case c == '"':
			v.state, v.key = jString, true
		default:
			v.state = jBad
		}
	case jColon:
		switch {
		case isSpaceJSON(c):
		case c == ':':
			v.state = jValue
		default:
			v.state = jBad
		}
	case jAfter:
		obj := v.objs[(v.depth-1)/64]&(1<<((v.depth-1)%64)) != 0
		switch {
		case isSpaceJSON(c):
		case c == ',' && obj:
			v.state = jKey
		case c == ',':
			v.state = jValue
		case c == '}' && obj, c == ']' && !obj:
			v.close()
		default:
			v.state = jBad
		}
	case jString:
		switch {
		case c == '"':
			if v.key {
				v.state, v.key = jColon, false
			} else {
				v.ended()
			}
		case c == '\\':
			v.state = jEscape
		case c < 0x20:
			v.state = jBad
		}
	case jEscape:
		switch c {
		case 'b', 'f', 'n', 'r', 't', '\\', '/', '"':
			v.state = jString
		case 'u':
			v.state, v.hex = jHex, 0
		default:
			v.state = jBad
		}
	case jHex:
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			v.state = jBad
		} else if v.hex++; v.hex == 4 {
			v.state = jString
		}
	case jMinus:
		switch {
		case c == '0':
			v.state = jZero
		case '1' <= c && c <= '9':
			v.state = jInt
		default:
			v.state = jBad
		}
	case jZero, jInt:
		switch {
		case v.state == jInt && '0' <= c && c <= '9':
		case c == '.':
			v.state = jDot
		case c == 'e' || c == 'E':
			v.state = jE
		default:
			v.ended()
			return v.feed(c)
		}
	case jDot:
		if '0' <= c && c <= '9' {
			v.state = jFrac
		} else {
			v.state = jBad
		}
	case jFrac:
		switch {
		case '0' <= c && c <= '9':
		case c == 'e' || c == 'E':
			v.state = jE
		default:
			v.ended()
			return v.feed(c)
		}
	case jE:
		switch {
		case c == '+' || c == '-':
			v.state = jESign
		case '0' <= c && c <= '9':
			v.state = jExp
		default:
			v.state = jBad
		}
	case jESign:
		if '0' <= c && c <= '9' {
			v.state = jExp
		} else {
			v.state = jBad
		}
	case jExp:
		if !('0' <= c && c <= '9') {
			v.ended()
			return v.feed(c)
		}
	case jLiteral:
		if c != v.lit[0] {
			v.state = jBad
		} else if v.lit = v.lit[1:]; v.lit == "" {
			v.ended()
		}
	case jDone:
		if !isSpaceJSON(c) {
			v.state = jBad
		}
	}
	return v.state != jBad
}

// begin reads c, the first byte of a value.
func (v *jsonCheck) begin(c byte) {
	switch {
	case c == '{' || c == '[':
		if v.depth == maxDepth {
			v.state = jBad
			return
		}
		v.depth++
		bit := uint64(1) << ((v.depth - 1) % 64)
		if c == '{' {
			v.objs[(v.depth-1)/64] |= bit
			v.state = jObjectFirst
		} else {
			v.objs[(v.depth-1)/64] &^= bit
			v.state = jArrayFirst
		}
	case c == '"':
		v.state, v.key = jString, false
	case c == '-':
		v.state = jMinus
	case c == '0':
		v.state = jZero
	case '1' <= c && c <= '9':
		v.state = jInt
	case c == 't':
		v.state, v.lit = jLiteral, "rue"
	case c == 'f':
		v.state, v.lit = jLiteral, "alse"
	case c == 'n':
		v.state, v.lit = jLiteral, "ull"
	default:
		v.state = jBad
	}
}

// close reads the closing bracket of the innermost open one.
func (v *jsonCheck) close() {
	v.depth--
	v.ended()
}

// ended moves past a complete value.
func (v *jsonCheck) ended() {
	if v.depth == 0 {
		v.state = jDone
	} else {
		v.state = jAfter
	}
}

// end reports whether the input read is one complete JSON value.
func (v *jsonCheck) end() bool {
	switch v.state {
	case jDone:
		return true
	case jZero, jInt, jFrac, jExp:
		return v.depth == 0
	}
	return false
}
