// Package modelfield finds and rewrites the top-level "model" member of a JSON
// object without decoding the document.
//
// The gateway rewrites the model of every request body and of every response
// and stream-chunk body, and every other byte must reach the other side as it
// was written (key order, number spelling, fields the gateway does not know).
// A decode/encode round trip would change those bytes and allocate per chunk,
// so a small validating scanner walks the bytes instead and the new value is
// spliced in.
//
// Only the first top-level "model" member counts: the scan stops there and
// does not look at the rest of the document. encoding/json (and most other
// decoders) take the last of duplicated keys, so a document with two
// top-level "model" members means different things to this package and to
// such a decoder.
package modelfield

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit, so that a document either
// accepts is accepted by the other, and so that a hostile body cannot make the
// recursive scanner grow the stack without bound.
const maxDepth = 10000

// ErrNotString is Get's error for a "model" member whose value is not a JSON
// string (a number, an object, null...).
var ErrNotString = errors.New("modelfield: model is not a JSON string")

// syntaxError is built only on the error path, so its allocation never touches
// a well-formed request.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("modelfield: invalid JSON object at offset %d: %s", e.off, e.msg)
}

func errAt(off int, msg string) error { return &syntaxError{off: off, msg: msg} }

func errEOF(doc []byte) error { return errAt(len(doc), "unexpected end of input") }

// Locate finds the top-level "model" member of the JSON object in doc and
// returns the byte span [start, end) of its value (for a string value,
// including the quotes). found is false when doc is an object without a
// top-level "model" key. err is non-nil when doc is not a syntactically valid
// JSON object as far as it was scanned: the scan stops after the first
// top-level "model" member and the delimiter that follows it, so bytes after
// that are not checked.
//
// A "model" value that is not a string is still located.
func Locate(doc []byte) (start, end int, found bool, err error) {
	return LocateKey(doc, "model")
}

// LocateKey is Locate for any top-level key: the gateway also reads
// "stream", "usage", "choices" and "response" this way, without decoding the
// document. key must be plain ASCII without quotes or backslashes.
func LocateKey(doc []byte, key string) (start, end int, found bool, err error) {
	return locate(doc, key, false)
}

// ErrDuplicateKey reports a key that occurs twice at the top level.
var ErrDuplicateKey = errors.New("modelfield: duplicate top-level key")

// LocateStrict is LocateKey over the whole document: it validates every
// byte and refuses a key that occurs twice. Decoders that keep the last
// duplicate (encoding/json, pydantic) would otherwise read a different value
// than the gateway authorised, so request bodies are checked this way.
func LocateStrict(doc []byte, key string) (start, end int, found bool, err error) {
	return locate(doc, key, true)
}

func locate(doc []byte, key string, whole bool) (start, end int, found bool, err error) {
	i := skipWS(doc, 0)
	if i >= len(doc) {
		return 0, 0, false, errEOF(doc)
	}
	if doc[i] != '{' {
		return 0, 0, false, errAt(i, "not a JSON object")
	}
	i = skipWS(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return 0, 0, false, checkTrailer(doc, i+1)
	}
	for {
		if i >= len(doc) {
			return 0, 0, false, errEOF(doc)
		}
		if doc[i] != '"' {
			return 0, 0, false, errAt(i, "expected object key")
		}
		kend, esc, err := scanString(doc, i)
		if err != nil {
			return 0, 0, false, err
		}
		isModel := keyIs(doc[i+1:kend-1], esc, key)
		i = skipWS(doc, kend)
		if i >= len(doc) {
			return 0, 0, false, errEOF(doc)
		}
		if doc[i] != ':' {
			return 0, 0, false, errAt(i, "expected ':' after object key")
		}
		i = skipWS(doc, i+1)
		vstart := i
		vend, err := skipValue(doc, i, 1)
		if err != nil {
			return 0, 0, false, err
		}
		i = skipWS(doc, vend)
		if i >= len(doc) {
			return 0, 0, false, errEOF(doc)
		}
		// The delimiter is checked before returning a found span too, so
		// that `{"model":01}` is rejected rather than rewritten.
		if isModel && whole {
			if found {
				return 0, 0, false, ErrDuplicateKey
			}
			start, end, found = vstart, vend, true
			isModel = false
		}
		switch doc[i] {
		case ',':
			if isModel {
				return vstart, vend, true, nil
			}
			i = skipWS(doc, i+1)
		case '}':
			if isModel {
				return vstart, vend, true, nil
			}
			if err := checkTrailer(doc, i+1); err != nil {
				return 0, 0, false, err
			}
			return start, end, found, nil
		default:
			return 0, 0, false, errAt(i, "expected ',' or '}' after object member")
		}
	}
}

// checkTrailer is reached only when the whole object was scanned without
// finding "model"; anything but whitespace after it makes the document
// invalid, and the caller would otherwise forward it as if it were fine.
func checkTrailer(doc []byte, i int) error {
	if i = skipWS(doc, i); i < len(doc) {
		return errAt(i, "data after the JSON object")
	}
	return nil
}

// Get returns the decoded string value of the top-level "model" member. ok is
// false if it is absent. err is non-nil if doc is not a JSON object (as far as
// Locate scans it) or the value is not a JSON string; the other results are
// then zero.
//
// Invalid UTF-8 and lone surrogate escapes decode to U+FFFD, as with
// encoding/json.
func Get(doc []byte) (model string, ok bool, err error) {
	start, end, found, err := Locate(doc)
	if err != nil || !found {
		return "", false, err
	}
	if doc[start] != '"' {
		return "", false, ErrNotString
	}
	raw := doc[start+1 : end-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw), true, nil
	}
	return string(appendUnquoted(make([]byte, 0, len(raw)+8), raw)), true, nil
}

// Set returns doc with the value of the top-level "model" member replaced by
// the JSON encoding of model, appended to dst[:0] (dst may be nil; reusing it
// avoids allocation). dst must not overlap doc. If doc has no top-level
// "model" member, it returns doc unchanged (appended to dst) and false. On
// error out is dst[:0].
//
// Invalid UTF-8 in model is written as \ufffd, as encoding/json does.
func Set(dst, doc []byte, model string) (out []byte, replaced bool, err error) {
	start, end, found, err := Locate(doc)
	if err != nil {
		return dst[:0], false, err
	}
	if !found {
		return append(dst[:0], doc...), false, nil
	}
	// One exact-size growth for the common plain-ASCII model; an escaped
	// model may still grow the slice once more inside appendQuoted.
	out = slices.Grow(dst[:0], start+len(model)+2+len(doc)-end)
	out = append(out, doc[:start]...)
	out = appendQuoted(out, model)
	out = append(out, doc[end:]...)
	return out, true, nil
}

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
		if depth >= maxDepth {
			return 0, errAt(i, "nesting too deep")
		}
		i = skipWS(doc, i+1)
		if i < len(doc) && doc[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(doc) {
				return 0, errEOF(doc)
			}
			if doc[i] != '"' {
				return 0, errAt(i, "expected object key")
			}
			kend, _, err := scanString(doc, i)
			if err != nil {
				return 0, err
			}
			i = skipWS(doc, kend)
			if i >= len(doc) {
				return 0, errEOF(doc)
			}
			if doc[i] != ':' {
				return 0, errAt(i, "expected ':' after object key")
			}
			if i, err = skipValue(doc, skipWS(doc, i+1), depth+1); err != nil {
				return 0, err
			}
			if i = skipWS(doc, i); i >= len(doc) {
				return 0, errEOF(doc)
			}
			switch doc[i] {
			case ',':
				i = skipWS(doc, i+1)
			case '}':
				return i + 1, nil
			default:
				return 0, errAt(i, "expected ',' or '}' after object member")
			}
		}
	case '[':
		if depth >= maxDepth {
			return 0, errAt(i, "nesting too deep")
		}
		i = skipWS(doc, i+1)
		if i < len(doc) && doc[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(doc, i, depth+1); err != nil {
				return 0, err
			}
			if i = skipWS(doc, i); i >= len(doc) {
				return 0, errEOF(doc)
			}
			switch doc[i] {
			case ',':
				i = skipWS(doc, i+1)
			case ']':
				return i + 1, nil
			default:
				return 0, errAt(i, "expected ',' or ']' after array element")
			}
		}
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
	if i < len(doc) && doc[i] == '.' {
		i++
		if i >= len(doc) {
			return 0, errEOF(doc)
		}
		if !isDigit(doc[i]) {
			return 0, errAt(i, "invalid number")
		}
		i = skipDigits(doc, i+1)
	}
	if i < len(doc) && (doc[i] == 'e' || doc[i] == 'E') {
		i++
		if i < len(doc) && (doc[i] == '+' || doc[i] == '-') {
			i++
		}
		if i >= len(doc) {
			return 0, errEOF(doc)
		}
		if !isDigit(doc[i]) {
			return 0, errAt(i, "invalid number")
		}
		i = skipDigits(doc, i+1)
	}
	return i, nil
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

// keyIs compares the raw (quoted-content) key with key. Keys are decoded
// only when they hold a backslash, which well-behaved clients never write,
// so the common path is a plain comparison.
func keyIs(raw []byte, escaped bool, key string) bool {
	if !escaped {
		return string(raw) == key
	}
	// Escapes never decode to more bytes than they take, so a raw key of
	// more than six bytes per key byte cannot match.
	if len(raw) > 6*len(key) {
		return false
	}
	// A non-ASCII byte decodes to something other than the ASCII key.
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	var buf [64]byte
	return string(appendUnquoted(buf[:0], raw)) == key
}

// appendUnquoted decodes the contents of a JSON string that scanString
// accepted, with encoding/json's rules for what it does not reject: a lone
// surrogate escape and each byte of invalid UTF-8 become U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			switch s[i+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(s[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if d := utf16.DecodeRune(r, hex4(s[i+2:])); d != utf8.RuneError {
							r = d
							i += 6
						} else {
							r = utf8.RuneError
						}
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, s[i+1])
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		}
	}
	return dst
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

// appendQuoted appends s as a JSON string. Model names are plain ASCII, which
// is found eight bytes at a time and copied in one append; the escapes match
// encoding/json without its HTML escaping (the bodies are never embedded in
// HTML).
// AppendString appends s as a JSON string, escaped as encoding/json does.
func AppendString(dst []byte, s string) []byte { return appendQuoted(dst, s) }

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
