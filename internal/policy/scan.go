package policy

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/rolter/rolter/internal/jsonscan"
)

// maxCount is where token counts read from a body saturate: far above any
// context length, and small enough that sums of two never overflow an int.
const maxCount = math.MaxInt32

// parser walks a JSON document in place with package jsonscan. Every method
// takes the offset of a value's first byte (whitespace already skipped) and
// returns the offset just past it; nothing is copied or decoded unless a
// method says so. The walk validates what it passes over, so a malformed
// body yields an error, never a panic or a wrong answer. Its errors are
// *jsonscan.SyntaxError until refusal turns them into a Refusal.
type parser struct {
	b []byte
}

func (p *parser) errAt(off int, msg string) error { return jsonscan.ErrAt(off, msg) }

func (p *parser) eof() error { return p.errAt(len(p.b), "unexpected end of input") }

// refusal is err as Inspect and Admit return it: a syntax error becomes a
// 400 invalid_json Refusal saying where the body went wrong.
func refusal(err error) error {
	var se *jsonscan.SyntaxError
	if errors.As(err, &se) {
		return &Refusal{Status: 400, Code: "invalid_json",
			Message: fmt.Sprintf("request body is not a valid JSON object (offset %d: %s)", se.Offset, se.Msg)}
	}
	return err
}

func (p *parser) ws(i int) int { return jsonscan.SkipWS(p.b, i) }

func (p *parser) str(i int) (end int, esc bool, err error) { return jsonscan.ScanString(p.b, i) }

func (p *parser) escLen(i int) (int, error) { return jsonscan.EscapeLen(p.b, i) }

// skip passes over any value. depth is the nesting depth of its container.
func (p *parser) skip(i, depth int) (int, error) { return jsonscan.SkipValue(p.b, i, depth) }

func isDigit(c byte) bool { return jsonscan.IsDigit(c) }

func (p *parser) object(i, depth int, f func(key []byte, v int) (int, error)) (int, error) {
	return jsonscan.Object(p.b, i, depth, f)
}

func (p *parser) array(i, depth int, f func(v int) (int, error)) (int, error) {
	return jsonscan.Array(p.b, i, depth, f)
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

func decodeRune(s []byte, i int) (rune, int) { return jsonscan.DecodeRune(s, i) }

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
