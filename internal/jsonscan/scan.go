// Package jsonscan is the gateway's JSON lexer: it walks a JSON document in
// place, validating what it passes over, without decoding it into Go values.
//
// The gateway forwards request and response bodies with every byte the
// client or upstream wrote (key order, number spelling, fields it does not
// know), changing only a few values: the model, an output limit, the usage
// option. A decode/encode round trip would change those bytes and allocate
// per chunk, so the gateway (Locate, Get, Set) and the policy inspection
// (Object, Array, SkipValue, ScanString) find spans with this scanner and
// splice new values in.
//
// Locate and its relatives take only the first of duplicated top-level
// keys: encoding/json (and most other decoders) take the last, so a
// document with two top-level "model" members means different things to
// this package and to such a decoder; LocateStrict refuses such documents.
package jsonscan

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is encoding/json's nesting limit, so that a document either
// accepts is accepted by the other, and so that a hostile body cannot make a
// recursive walk grow the stack without bound.
const MaxDepth = maxDepth

const maxDepth = 10000

// SyntaxError is the error for a document that is not valid JSON: Msg says
// what was wrong at byte Offset. It is built only on the error path, so its
// allocation never touches a well-formed document.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("jsonscan: invalid JSON object at offset %d: %s", e.Offset, e.Msg)
}

// ErrAt is a *SyntaxError at off, for callers that check what they walk
// (a policy reading message text) and find it wrong.
func ErrAt(off int, msg string) error { return &SyntaxError{Offset: off, Msg: msg} }

func errAt(off int, msg string) error { return &SyntaxError{Offset: off, Msg: msg} }

func errEOF(doc []byte) error { return errAt(len(doc), "unexpected end of input") }

func skipWS(doc []byte, i int) int {
	for i < len(doc) {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the offset just past the JSON value starting at doc[i].
// depth is the nesting depth of the container holding the value.
func skipValue(doc []byte, i, depth int) (int, error) {
	if i >= len(doc) {
		return 0, errEOF(doc)
	}
	switch c := doc[i]; c {
	case '"':
		end, _, err := scanString(doc, i)
		return end, err
	case '{':
		i, done, err := open(doc, i, depth, '}')
		for !done && err == nil {
			if _, _, i, err = memberKey(doc, i); err != nil {
				return 0, err
			}
			if i, err = skipValue(doc, i, depth+1); err != nil {
				return 0, err
			}
			i, done, err = next(doc, i, '}', "expected ',' or '}' after object member")
		}
		return i, err
	case '[':
		i, done, err := open(doc, i, depth, ']')
		for !done && err == nil {
			if i, err = skipValue(doc, i, depth+1); err != nil {
				return 0, err
			}
			i, done, err = next(doc, i, ']', "expected ',' or ']' after array element")
		}
		return i, err
	case 't':
		return skipLiteral(doc, i, "true")
	case 'f':
		return skipLiteral(doc, i, "false")
	case 'n':
		return skipLiteral(doc, i, "null")
	default:
		if c == '-' || ('0' <= c && c <= '9') {
			return scanNumber(doc, i)
		}
		return 0, errAt(i, "expected a JSON value")
	}
}

func skipLiteral(doc []byte, i int, lit string) (int, error) {
	if len(doc)-i >= len(lit) && string(doc[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	if len(doc)-i < len(lit) && string(doc[i:]) == lit[:len(doc)-i] {
		return 0, errEOF(doc)
	}
	return 0, errAt(i, "invalid literal")
}

// scanNumber checks the JSON number grammar; what may follow the number is
// the caller's business, which is how "01" and "1x" are rejected.
func scanNumber(doc []byte, i int) (int, error) {
	if doc[i] == '-' {
		i++
	}
	if i >= len(doc) {
		return 0, errEOF(doc)
	}
	switch c := doc[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i = skipDigits(doc, i+1)
	default:
		return 0, errAt(i, "invalid number")
	}
	var err error
	if i < len(doc) && doc[i] == '.' {
		if i, err = someDigits(doc, i+1); err != nil {
			return 0, err
		}
	}
	if i < len(doc) && (doc[i] == 'e' || doc[i] == 'E') {
		i++
		if i < len(doc) && (doc[i] == '+' || doc[i] == '-') {
			i++
		}
		if i, err = someDigits(doc, i); err != nil {
			return 0, err
		}
	}
	return i, nil
}

// someDigits skips the one or more digits that must stand at doc[i].
func someDigits(doc []byte, i int) (int, error) {
	if i >= len(doc) {
		return 0, errEOF(doc)
	}
	if !isDigit(doc[i]) {
		return 0, errAt(i, "invalid number")
	}
	return skipDigits(doc, i+1), nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipDigits(doc []byte, i int) int {
	for i < len(doc) && isDigit(doc[i]) {
		i++
	}
	return i
}

// plain marks the bytes a JSON string may hold as they are.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special is non-zero iff one of the eight bytes in x is '"', '\\' or a
// control character. Each term is the classic exact "has a byte below n"
// test: a borrow can only start at a byte that really matches, so there are
// no false positives, which lets the byte loop after it stop within eight
// bytes. Message text dominates request bodies, so this is most of the scan.
func special(x uint64) uint64 {
	q := x ^ (lsb * '"')
	b := x ^ (lsb * '\\')
	// '"' and '\\' are ASCII, so ^q and ^b have the same top bits as ^x.
	return ((q - lsb) | (b - lsb) | (x - lsb*0x20)) & ^x & msb
}

// scanString checks the JSON string starting at doc[i] (the opening quote)
// and returns the offset just past its closing quote, and whether it
// contains a backslash escape.
func scanString(doc []byte, i int) (end int, escaped bool, err error) {
	i++
	for {
		for {
			if i+8 > len(doc) {
				for i < len(doc) && plain[doc[i]] {
					i++
				}
				break
			}
			if m := special(binary.LittleEndian.Uint64(doc[i:])); m != 0 {
				// The lowest flag is exact (no borrow reaches it), so it
				// is the first byte to look at.
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(doc) {
			return 0, false, errEOF(doc)
		}
		switch c := doc[i]; c {
		case '"':
			return i + 1, escaped, nil
		case '\\':
			escaped = true
			if i+1 >= len(doc) {
				return 0, false, errEOF(doc)
			}
			switch doc[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(doc) {
						return 0, false, errEOF(doc)
					}
					if hexVal(doc[k]) < 0 {
						return 0, false, errAt(k, "invalid \\u escape in string")
					}
				}
				i += 6
			default:
				return 0, false, errAt(i, "invalid escape in string")
			}
		default:
			return 0, false, errAt(i, "control character in string")
		}
	}
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

// appendUnquoted decodes the contents of a JSON string that scanString
// accepted, with encoding/json's rules for what it does not reject: a lone
// surrogate escape and each byte of invalid UTF-8 become U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' && c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, n := DecodeRune(s, i)
		dst = utf8.AppendRune(dst, r)
		i += n
	}
	return dst
}

// DecodeRune decodes one character of string contents that scanString
// accepted, at s[i:], with encoding/json's (and Python's) handling of
// escapes: a surrogate pair spanning two escapes is joined; a lone surrogate
// escape and invalid UTF-8 give utf8.RuneError. n is how many bytes it took.
func DecodeRune(s []byte, i int) (r rune, n int) {
	c := s[i]
	if c >= utf8.RuneSelf {
		return utf8.DecodeRune(s[i:])
	}
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

func hex4(s []byte) rune {
	return hexVal(s[0])<<12 | hexVal(s[1])<<8 | hexVal(s[2])<<4 | hexVal(s[3])
}

const hexDigits = "0123456789abcdef"

func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// AppendString appends s as a JSON string, escaped as encoding/json does.
func AppendString(dst []byte, s string) []byte { return appendQuoted(dst, s) }

// appendQuoted appends s as a JSON string. Model names are plain ASCII, which
// is found eight bytes at a time and copied in one append; the escapes match
// encoding/json without its HTML escaping (the bodies are never embedded in
// HTML).
func appendQuoted(dst []byte, s string) []byte {
	i := 0
	for i+8 <= len(s) {
		if x := load64(s, i); special(x)|x&msb != 0 {
			break
		}
		i += 8
	}
	for i < len(s) && s[i] < utf8.RuneSelf && plain[s[i]] {
		i++
	}
	dst = append(dst, '"')
	if i == len(s) {
		dst = append(dst, s...)
		return append(dst, '"')
	}
	start := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but they end lines in JavaScript; encoding/json
			// escapes them too.
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// SkipWS returns the offset of the first byte at or after i that is not
// JSON whitespace.
func SkipWS(doc []byte, i int) int { return skipWS(doc, i) }

// SkipValue returns the offset just past the JSON value starting at doc[i]
// (whitespace already skipped), checking it. depth is the nesting depth of
// the container holding the value (1 for a top-level member).
func SkipValue(doc []byte, i, depth int) (int, error) { return skipValue(doc, i, depth) }

// ScanString checks the JSON string starting at doc[i] (the opening quote)
// and returns the offset just past its closing quote, and whether it holds a
// backslash escape.
func ScanString(doc []byte, i int) (end int, escaped bool, err error) { return scanString(doc, i) }

// ScanNumber checks the JSON number starting at doc[i] and returns the
// offset past it; what may follow it is the caller's business.
func ScanNumber(doc []byte, i int) (int, error) { return scanNumber(doc, i) }

// EscapeLen checks the escape at doc[i] (a backslash) and returns its length.
func EscapeLen(doc []byte, i int) (int, error) {
	if i+1 >= len(doc) {
		return 0, errEOF(doc)
	}
	switch doc[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		for k := i + 2; k < i+6; k++ {
			if k >= len(doc) {
				return 0, errEOF(doc)
			}
			if hexVal(doc[k]) < 0 {
				return 0, errAt(k, "invalid \\u escape in string")
			}
		}
		return 6, nil
	}
	return 0, errAt(i, "invalid escape in string")
}

// AppendUnquoted appends the decoded contents of a string ScanString
// accepted (s is what lies between the quotes).
func AppendUnquoted(dst, s []byte) []byte { return appendUnquoted(dst, s) }

// Unquoted returns the decoded contents of the string value at doc[i:end]
// (quotes included): the raw bytes when there is no escape, else decoded
// into dst.
func Unquoted(doc []byte, i, end int, dst []byte) []byte {
	raw := doc[i+1 : end-1]
	for _, c := range raw {
		if c == '\\' {
			return appendUnquoted(dst, raw)
		}
	}
	return raw
}

// IsDigit reports whether c is an ASCII digit.
func IsDigit(c byte) bool { return isDigit(c) }

// Object walks the object at doc[i] ('{'), calling f with each member's key
// (the raw bytes between the quotes, or decoded into a fresh slice when the
// key holds an escape, which well-behaved clients never write) and the
// offset of its value; f returns the offset just past the value. depth is
// the object's nesting depth (0 for the document). It returns the offset
// just past the object.
func Object(doc []byte, i, depth int, f func(key []byte, v int) (int, error)) (int, error) {
	i, done, err := open(doc, i, depth, '}')
	for !done && err == nil {
		var kend int
		var esc bool
		start := i
		if kend, esc, i, err = memberKey(doc, i); err != nil {
			return 0, err
		}
		key := doc[start+1 : kend-1]
		if esc {
			key = appendUnquoted(nil, key)
		}
		if i, err = f(key, i); err != nil {
			return 0, err
		}
		i, done, err = next(doc, i, '}', "expected ',' or '}' after object member")
	}
	return i, err
}

// Array walks the array at doc[i] ('['), calling f with the offset of each
// element; f returns the offset just past it. depth is the array's nesting
// depth.
func Array(doc []byte, i, depth int, f func(v int) (int, error)) (int, error) {
	i, done, err := open(doc, i, depth, ']')
	for !done && err == nil {
		if i, err = f(i); err != nil {
			return 0, err
		}
		i, done, err = next(doc, i, ']', "expected ',' or ']' after array element")
	}
	return i, err
}

// open enters the object or array at doc[i], of the given nesting depth,
// whose closing byte is closer. It returns the offset of its first member or
// element, or with done the offset just past an empty one.
func open(doc []byte, i, depth int, closer byte) (int, bool, error) {
	if depth >= maxDepth {
		return 0, false, errAt(i, "nesting too deep")
	}
	i = skipWS(doc, i+1)
	if i < len(doc) && doc[i] == closer {
		return i + 1, true, nil
	}
	if i >= len(doc) {
		return 0, false, errEOF(doc)
	}
	return i, false, nil
}

// memberKey reads the object key at doc[i] and the ':' after it. It returns
// the end of the key string, whether the key holds an escape, and the offset
// of the member's value.
func memberKey(doc []byte, i int) (kend int, esc bool, v int, err error) {
	if doc[i] != '"' {
		return 0, false, 0, errAt(i, "expected object key")
	}
	if kend, esc, err = scanString(doc, i); err != nil {
		return 0, false, 0, err
	}
	if i = skipWS(doc, kend); i >= len(doc) {
		return 0, false, 0, errEOF(doc)
	}
	if doc[i] != ':' {
		return 0, false, 0, errAt(i, "expected ':' after object key")
	}
	if i = skipWS(doc, i+1); i >= len(doc) {
		return 0, false, 0, errEOF(doc)
	}
	return kend, esc, i, nil
}

// next reads what follows a member or element that ends before doc[i]: a
// ',' (it returns the offset of the next one) or closer (it returns the
// offset just past it, with done). what names the error otherwise.
func next(doc []byte, i int, closer byte, what string) (int, bool, error) {
	if i = skipWS(doc, i); i >= len(doc) {
		return 0, false, errEOF(doc)
	}
	switch doc[i] {
	case ',':
		i = skipWS(doc, i+1)
		if i >= len(doc) {
			return 0, false, errEOF(doc)
		}
		return i, false, nil
	case closer:
		return i + 1, true, nil
	}
	return 0, false, errAt(i, what)
}

// Walk walks doc, which must be one JSON object and nothing else but
// whitespace, calling f for each top-level member as Object does.
func Walk(doc []byte, f func(key []byte, v int) (int, error)) error {
	i := skipWS(doc, 0)
	if i >= len(doc) {
		return errEOF(doc)
	}
	if doc[i] != '{' {
		return errAt(i, "not a JSON object")
	}
	end, err := Object(doc, i, 0, f)
	if err != nil {
		return err
	}
	return checkTrailer(doc, end)
}
