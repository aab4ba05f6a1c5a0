package jsonscan

import (
	"bytes"
	"errors"
	"slices"
	"unicode/utf8"
)

// ErrNotString is Get's error for a "model" member whose value is not a JSON
// string (a number, an object, null...).
var ErrNotString = errors.New("jsonscan: model is not a JSON string")

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
var ErrDuplicateKey = errors.New("jsonscan: duplicate top-level key")

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

// LocateAll is LocateKey for several keys in one scan: spans[k] is set to
// the value span of the first top-level member named keys[k], or to
// {-1, -1} when there is none. As with LocateKey, the scan stops once every
// key was found (after the delimiter that follows the last), so bytes after
// that are not checked. err is non-nil when the document is invalid as far
// as it was scanned; the spans found before the fault are still set, each
// one with its delimiter checked. len(spans) must be len(keys).
func LocateAll(doc []byte, keys []string, spans [][2]int) error {
	if len(spans) != len(keys) {
		panic("jsonscan: LocateAll needs one span per key") // a caller's bug, not input
	}
	for k := range spans {
		spans[k] = [2]int{-1, -1}
	}
	left := len(keys)
	i := skipWS(doc, 0)
	if i >= len(doc) {
		return errEOF(doc)
	}
	if doc[i] != '{' {
		return errAt(i, "not a JSON object")
	}
	i = skipWS(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return checkTrailer(doc, i+1)
	}
	for {
		if i >= len(doc) {
			return errEOF(doc)
		}
		if doc[i] != '"' {
			return errAt(i, "expected object key")
		}
		kend, esc, err := scanString(doc, i)
		if err != nil {
			return err
		}
		match := -1
		for k, key := range keys {
			if spans[k][0] < 0 && keyIs(doc[i+1:kend-1], esc, key) {
				match = k
				break
			}
		}
		i = skipWS(doc, kend)
		if i >= len(doc) {
			return errEOF(doc)
		}
		if doc[i] != ':' {
			return errAt(i, "expected ':' after object key")
		}
		i = skipWS(doc, i+1)
		vstart := i
		vend, err := skipValue(doc, i, 1)
		if err != nil {
			return err
		}
		if i = skipWS(doc, vend); i >= len(doc) {
			return errEOF(doc)
		}
		if doc[i] != ',' && doc[i] != '}' {
			return errAt(i, "expected ',' or '}' after object member")
		}
		if match >= 0 {
			spans[match] = [2]int{vstart, vend} //nolint:gosec // G602: match indexes keys, and len(spans) == len(keys)
			if left--; left == 0 {
				return nil
			}
		}
		if doc[i] == '}' {
			return checkTrailer(doc, i+1)
		}
		i = skipWS(doc, i+1)
	}
}
