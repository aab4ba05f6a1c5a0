package policy

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit (and modelfield's), so a body the
// gateway accepted is never refused here for its depth, and a hostile body
// cannot grow the recursive walk without bound.
const maxDepth = 10000

// maxCount is where token counts read from a body saturate: far above any
// context length, and small enough that sums of two never overflow an int.
const maxCount = math.MaxInt32

// parser walks a JSON document in place. Every method takes the offset of a
// value's first byte (whitespace already skipped) and returns the offset just
// past it; nothing is copied or decoded unless a method says so. The walk
// validates what it passes over, so a malformed body yields an error, never a
// panic or a wrong answer.
type parser struct {
	b []byte
}

func (p *parser) errAt(off int, msg string) error {
	return &Refusal{Status: 400, Code: "invalid_json",
		Message: fmt.Sprintf("request body is not a valid JSON object (offset %d: %s)", off, msg)}
}

func (p *parser) eof() error { return p.errAt(len(p.b), "unexpected end of input") }

func (p *parser) ws(i int) int {
	for i < len(p.b) {
		switch p.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// str checks the string starting at b[i] (the opening quote) and returns the
// offset past its closing quote and whether it holds a backslash escape.
func (p *parser) str(i int) (end int, esc bool, err error) {
	b := p.b
	for i++; i < len(b); {
		// Eight bytes at a time up to the first quote, backslash or
		// control character (base64 media and long text are most of a
		// body).
		for i+8 <= len(b) {
			if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, esc, nil
		case c == '\\':
			n, err := p.escLen(i)
			if err != nil {
				return 0, false, err
			}
			esc = true
			i += n
		case c < 0x20:
			return 0, false, p.errAt(i, "control character in string")
		default:
			i++
		}
	}
	return 0, false, p.eof()
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special is non-zero iff one of the eight bytes in x is '"', '\\' or a
// control character, and its lowest set bit is in the first such byte (the
// exact "has a byte below n" test, as in modelfield).
func special(x uint64) uint64 {
	q := x ^ (lsb * '"')
	b := x ^ (lsb * '\\')
	return ((q - lsb) | (b - lsb) | (x - lsb*0x20)) & ^x & msb
}

// escLen validates the escape at b[i] (a backslash) and returns its length.
func (p *parser) escLen(i int) (int, error) {
	b := p.b
	if i+1 >= len(b) {
		return 0, p.eof()
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		for k := i + 2; k < i+6; k++ {
			if k >= len(b) {
				return 0, p.eof()
			}
			if hexVal(b[k]) < 0 {
				return 0, p.errAt(k, "invalid \\u escape in string")
			}
		}
		return 6, nil
	}
	return 0, p.errAt(i, "invalid escape in string")
}

func hexVal(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// skip passes over any value. depth is the nesting depth of its container.
func (p *parser) skip(i, depth int) (int, error) {
	if i >= len(p.b) {
		return 0, p.eof()
	}
	switch c := p.b[i]; c {
	case '"':
		end, _, err := p.str(i)
		return end, err
	case '{':
		return p.object(i, depth, func(_ []byte, v int) (int, error) { return p.skip(v, depth+1) })
	case '[':
		return p.array(i, depth, func(v int) (int, error) { return p.skip(v, depth+1) })
	case 't':
		return p.literal(i, "true")
	case 'f':
		return p.literal(i, "false")
	case 'n':
		return p.literal(i, "null")
	default:
		if c == '-' || isDigit(c) {
			return p.number(i)
		}
		return 0, p.errAt(i, "expected a JSON value")
	}
}

func (p *parser) literal(i int, lit string) (int, error) {
	if len(p.b)-i >= len(lit) && string(p.b[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	return 0, p.errAt(i, "invalid literal")
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number checks the JSON number grammar; what follows is the caller's
// business (the delimiter check rejects "01" and "1x").
func (p *parser) number(i int) (int, error) {
	b := p.b
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return 0, p.eof()
	}
	switch {
	case b[i] == '0':
		i++
	case isDigit(b[i]):
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return 0, p.errAt(i, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, p.errAt(i, "invalid number")
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, p.errAt(i, "invalid number")
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i, nil
}

// object walks the object at b[i] ('{'), calling f with each member's decoded
// key (raw bytes unless the key holds an escape, which is rare enough to
// decode into a fresh slice) and the offset of its value; f returns the
// offset past the value.
func (p *parser) object(i, depth int, f func(key []byte, v int) (int, error)) (int, error) {
	if depth >= maxDepth {
		return 0, p.errAt(i, "nesting too deep")
	}
	b := p.b
	i = p.ws(i + 1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return 0, p.eof()
		}
		if b[i] != '"' {
			return 0, p.errAt(i, "expected object key")
		}
		kend, esc, err := p.str(i)
		if err != nil {
			return 0, err
		}
		key := b[i+1 : kend-1]
		if esc {
			key = unquote(nil, key)
		}
		if i = p.ws(kend); i >= len(b) {
			return 0, p.eof()
		}
		if b[i] != ':' {
			return 0, p.errAt(i, "expected ':' after object key")
		}
		if i = p.ws(i + 1); i >= len(b) {
			return 0, p.eof()
		}
		if i, err = f(key, i); err != nil {
			return 0, err
		}
		if i = p.ws(i); i >= len(b) {
			return 0, p.eof()
		}
		switch b[i] {
		case ',':
			i = p.ws(i + 1)
		case '}':
			return i + 1, nil
		default:
			return 0, p.errAt(i, "expected ',' or '}' after object member")
		}
	}
}

// array walks the array at b[i] ('['), calling f with the offset of each
// element.
func (p *parser) array(i, depth int, f func(v int) (int, error)) (int, error) {
	if depth >= maxDepth {
		return 0, p.errAt(i, "nesting too deep")
	}
	b := p.b
	i = p.ws(i + 1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return 0, p.eof()
		}
		var err error
		if i, err = f(i); err != nil {
			return 0, err
		}
		if i = p.ws(i); i >= len(b) {
			return 0, p.eof()
		}
		switch b[i] {
		case ',':
			i = p.ws(i + 1)
		case ']':
			return i + 1, nil
		default:
			return 0, p.errAt(i, "expected ',' or ']' after array element")
		}
	}
}

// isNull reports whether the value at b[i] is the literal null.
func (p *parser) isNull(i int) bool {
	return len(p.b)-i >= 4 && string(p.b[i:i+4]) == "null"
}

// nonEmpty passes over a value and reports whether it is something other
// than null or an empty array: how "tools" and "functions" are judged.
func (p *parser) nonEmpty(i, depth int) (bool, int, error) {
	end, err := p.skip(i, depth)
	if err != nil {
		return false, 0, err
	}
	switch p.b[i] {
	case 'n':
		return false, end, nil
	case '[':
		return p.ws(i+1) != end-1, end, nil
	}
	return true, end, nil
}

// count is a token count read from a body: null, a non-negative integer, or
// something else.
type count struct {
	present bool // the key occurred
	null    bool // its value is null
	bad     bool // not null and not a non-negative integer
	n       int  // the value, saturated at maxCount
}

func (p *parser) count(i, depth int) (count, int, error) {
	end, err := p.skip(i, depth)
	if err != nil {
		return count{}, 0, err
	}
	c := count{present: true}
	switch b := p.b[i]; {
	case b == 'n':
		c.null = true
	case b == '-' || isDigit(b):
		n, ok := parseCount(p.b[i:end])
		c.n, c.bad = n, !ok
	default:
		c.bad = true
	}
	return c, end, nil
}

// parseCount reads a validated JSON number as a non-negative integer. A
// number with a fraction or exponent is accepted when its value is integral
// (100.0, 1e3), as lax decoders such as pydantic accept it.
func parseCount(raw []byte) (int, bool) {
	plain := true
	for _, c := range raw {
		if c == '.' || c == 'e' || c == 'E' {
			plain = false
			break
		}
	}
	if plain {
		neg := raw[0] == '-'
		if neg {
			raw = raw[1:]
		}
		n := 0
		for _, c := range raw {
			if n < maxCount {
				n = n*10 + int(c-'0')
			}
		}
		if neg && n != 0 {
			return 0, false
		}
		return min(n, maxCount), true
	}
	// An overflow is ±Inf with an error (saturated below); an underflow
	// is 0, as Python reads it.
	f, _ := strconv.ParseFloat(string(raw), 64)
	if f < 0 || f != math.Trunc(f) {
		return 0, false
	}
	if f >= maxCount {
		return maxCount, true
	}
	return int(f), true
}

// decodeRune decodes one character of validated JSON string contents at
// s[i:], with encoding/json's (and Python's) handling of escapes; a lone
// surrogate escape and invalid UTF-8 give utf8.RuneError.
func decodeRune(s []byte, i int) (rune, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		if c != '\\' {
			return rune(c), 1
		}
		if i+1 >= len(s) {
			return utf8.RuneError, 1
		}
		switch s[i+1] {
		case 'b':
			return '\b', 2
		case 'f':
			return '\f', 2
		case 'n':
			return '\n', 2
		case 'r':
			return '\r', 2
		case 't':
			return '\t', 2
		case 'u':
			if i+6 > len(s) {
				return utf8.RuneError, len(s) - i
			}
			r := hex4(s[i+2:])
			if !utf16.IsSurrogate(r) {
				return r, 6
			}
			if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				if d := utf16.DecodeRune(r, hex4(s[i+8:])); d != utf8.RuneError {
					return d, 12
				}
			}
			return utf8.RuneError, 6
		default: // '"', '\\', '/'
			return rune(s[i+1]), 2
		}
	}
	return utf8.DecodeRune(s[i:])
}

func hex4(s []byte) rune {
	return hexVal(s[0])<<12 | hexVal(s[1])<<8 | hexVal(s[2])<<4 | hexVal(s[3])
}

// unquote appends the decoded contents of a validated JSON string.
func unquote(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		r, n := decodeRune(s, i)
		dst = utf8.AppendRune(dst, r)
		i += n
	}
	return dst
}

// strIs reports whether the string value at b[i:end] (quotes included)
// decodes to lit.
func (p *parser) strIs(i, end int, lit string) bool {
	s := p.b[i+1 : end-1]
	k := 0
	for j := 0; j < len(s); {
		r, n := decodeRune(s, j)
		j += n
		if r >= utf8.RuneSelf || k >= len(lit) || byte(r) != lit[k] {
			return false
		}
		k++
	}
	return k == len(lit)
}

// strHasPrefixFold reports whether the string value at b[i:end] starts with
// prefix (lower-case ASCII), ignoring ASCII case. Only the prefix is decoded:
// the value may be megabytes of base64.
func (p *parser) strHasPrefixFold(i, end int, prefix string) bool {
	s := p.b[i+1 : end-1]
	k := 0
	for j := 0; j < len(s) && k < len(prefix); {
		r, n := decodeRune(s, j)
		j += n
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		if r != rune(prefix[k]) {
			return false
		}
		k++
	}
	return k == len(prefix)
}
