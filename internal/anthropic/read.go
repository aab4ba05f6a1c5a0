package anthropic

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The request translators read the body in place. The body is validated
// once, as a whole, with encoding/json's scanner; after that every value is
// a sub-slice of it, exactly as encoding/json would have handed it out as a
// json.RawMessage (no surrounding space), and nothing is copied or decoded
// into Go values unless it must be: an object's members are indexed in a
// fixed table, arrays are walked element by element, and a string is
// decoded only when it holds an escape or invalid UTF-8. So a request costs
// its output and a few scratch buffers, however many blocks it holds.

// ws returns the index of the first non-space byte of b at or after i.
func ws(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipStr returns the end of the string that starts at b[i].
func skipStr(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b) // not reached on valid JSON
		}
		q := i + j
		n := 0
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// skip returns the end of the value that starts at b[i].
func skip(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipStr(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipStr(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// elems walks the elements of a JSON array.
type elems struct {
	b []byte
	i int
}

func arrayElems(raw []byte) elems { return elems{b: raw, i: 1} }

func (it *elems) next() ([]byte, bool) {
	i := ws(it.b, it.i)
	if i >= len(it.b) || it.b[i] == ']' {
		return nil, false
	}
	if it.b[i] == ',' {
		i = ws(it.b, i+1)
	}
	end := skip(it.b, i)
	it.i = end
	return it.b[i:end], true
}

// members walks the members of a JSON object: the raw key (quotes
// included) and the value.
type members struct {
	b []byte
	i int
}

func (it *members) next() (key, val []byte, ok bool) {
	i := ws(it.b, it.i)
	if i >= len(it.b) || it.b[i] == '}' {
		return nil, nil, false
	}
	if it.b[i] == ',' {
		i = ws(it.b, i+1)
	}
	ke := skipStr(it.b, i)
	v := ws(it.b, ws(it.b, ke)+1) // past the colon
	ve := skip(it.b, v)
	it.i = ve
	return it.b[i:ke], it.b[v:ve], true
}

func isNullRaw(v []byte) bool { return len(v) == 4 && string(v) == "null" }

// maxKeys is the most keys an obj indexes: the top level of an OpenAI
// request, with the fields that are accepted at their neutral value.
const maxKeys = 24

// obj is a JSON object read in place. Its members are read as
// encoding/json reads them into a map: a repeated key keeps its last value,
// and a key that holds null is absent. Only the keys named at decoding are
// indexed; whether any other key holds a value is remembered for checkKeys.
type obj struct {
	raw   []byte
	keys  []string
	vals  [maxKeys][]byte // the value of keys[i]; nil when absent or null
	other bool            // a member outside keys holds a value
}

// decodeObj reads raw as a JSON object whose members may be any of keys.
func decodeObj(o *obj, raw []byte, p path, keys []string) error {
	if len(raw) == 0 || raw[0] != '{' {
		return errf(p.String(), "must be an object, not %s", kind(raw))
	}
	*o = obj{raw: raw, keys: keys}
	it := members{b: raw, i: 1}
	var buf [32]byte
	for {
		k, v, ok := it.next()
		if !ok {
			return nil
		}
		i := o.find(keyText(k, buf[:0]))
		if i < 0 {
			o.other = o.other || !isNullRaw(v)
			continue
		}
		if isNullRaw(v) {
			v = nil
		}
		o.vals[i] = v
	}
}

// keyText returns the decoded text of the raw key k, in buf when it must be
// decoded.
func keyText(k, buf []byte) []byte {
	if bytes.IndexByte(k, '\\') < 0 && utf8.Valid(k) {
		return k[1 : len(k)-1]
	}
	return appendDecoded(buf, k)
}

func (o *obj) find(k []byte) int {
	for i, key := range o.keys {
		if key == string(k) {
			return i
		}
	}
	return -1
}

// get is the value of key, nil when absent or null. key must be one of the
// keys the object was decoded with.
func (o *obj) get(key string) []byte {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i]
		}
	}
	panic("anthropic: key " + key + " not indexed")
}

func (o *obj) has(key string) bool { return o.get(key) != nil }

// checkKeys rejects any key of o outside allowed, so that no field is
// dropped without a decision. The smallest such key is reported, so that
// the message is deterministic.
func (o *obj) checkKeys(p path, allowed ...string) error {
	bad, found := "", false
	for i, k := range o.keys {
		if o.vals[i] != nil && !slices.Contains(allowed, k) && (!found || k < bad) {
			bad, found = k, true
		}
	}
	if o.other {
		if k, ok := o.otherKey(); ok && (!found || k < bad) {
			bad, found = k, true
		}
	}
	if !found {
		return nil
	}
	return errf(p.key(bad).String(), "is not supported by this translation")
}

// otherKey is the smallest key outside o.keys whose last value is not null.
// Only a request with a field the translation refuses (or one repeated and
// then nulled) comes here. The members are sorted by key and position, so
// that the last value of each key is found without a map.
func (o *obj) otherKey() (string, bool) {
	var offs []int32
	var buf [32]byte
	it := members{b: o.raw, i: 1}
	for {
		start := ws(o.raw, it.i)
		k, _, ok := it.next()
		if !ok {
			break
		}
		if o.raw[start] == ',' {
			start = ws(o.raw, start+1)
		}
		if o.find(keyText(k, buf[:0])) < 0 {
			offs = append(offs, int32(start))
		}
	}
	var bufA, bufB []byte
	member := func(off int32) (key, val []byte) {
		it := members{b: o.raw, i: int(off)}
		key, val, _ = it.next()
		return key, val
	}
	// keyIn decodes into *buf only when it must: a clean key is its own
	// bytes, which must never be appended to.
	keyIn := func(k []byte, buf *[]byte) []byte {
		if bytes.IndexByte(k, '\\') < 0 && utf8.Valid(k) {
			return k[1 : len(k)-1]
		}
		*buf = appendDecoded((*buf)[:0], k)
		return *buf
	}
	slices.SortFunc(offs, func(x, y int32) int {
		kx, _ := member(x)
		ky, _ := member(y)
		if c := bytes.Compare(keyIn(kx, &bufA), keyIn(ky, &bufB)); c != 0 {
			return c
		}
		return int(x - y)
	})
	for i, off := range offs {
		k, v := member(off)
		if i+1 < len(offs) {
			next, _ := member(offs[i+1])
			if bytes.Equal(keyIn(k, &bufA), keyIn(next, &bufB)) {
				continue // not the last value of this key
			}
		}
		if !isNullRaw(v) {
			return string(keyIn(k, &bufA)), true
		}
	}
	return "", false
}

// str returns the text of the string member key, decoded (see text).
func (o *obj) str(key string, p path) ([]byte, bool, error) {
	raw := o.get(key)
	if raw == nil {
		return nil, false, nil
	}
	if raw[0] != '"' {
		return nil, false, errf(p.key(key).String(), "must be a string, not %s", kind(raw))
	}
	return text(raw), true, nil
}

func (o *obj) reqStr(key string, p path) ([]byte, error) {
	s, ok, err := o.str(key, p)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errf(p.key(key).String(), "is required")
	}
	return s, nil
}

func (o *obj) boolean(key string, p path) (bool, bool, error) {
	raw := o.get(key)
	switch string(raw) {
	case "":
		return false, false, nil
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, false, errf(p.key(key).String(), "must be a boolean, not %s", kind(raw))
}

// number returns the raw JSON of a numeric member, checked to fit a
// float64 as encoding/json would.
func (o *obj) number(key string, p path) ([]byte, bool, error) {
	raw := o.get(key)
	if raw == nil {
		return nil, false, nil
	}
	if kind(raw) != "a number" {
		return nil, false, errf(p.key(key).String(), "must be a number, not %s", kind(raw))
	}
	if _, err := strconv.ParseFloat(string(raw), 64); err != nil {
		return nil, false, errf(p.key(key).String(), "must be a number, not %s", kind(raw))
	}
	return raw, true, nil
}

func (o *obj) integer(key string, p path) (int64, bool, error) {
	raw := o.get(key)
	if raw == nil {
		return 0, false, nil
	}
	var n int64
	if kind(raw) != "a number" || json.Unmarshal(raw, &n) != nil {
		return 0, false, errf(p.key(key).String(), "must be an integer, not %s", kind(raw))
	}
	return n, true, nil
}

// array returns the raw JSON of an array member.
func (o *obj) array(key string, p path) ([]byte, bool, error) {
	raw := o.get(key)
	if raw == nil {
		return nil, false, nil
	}
	if raw[0] != '[' {
		return nil, false, errf(p.key(key).String(), "must be an array, not %s", kind(raw))
	}
	return raw, true, nil
}

// isEmptyArray reports whether raw is [] (with any space inside).
func isEmptyArray(raw []byte) bool {
	it := arrayElems(raw)
	_, ok := it.next()
	return !ok
}

// text returns the decoded text of the JSON string raw: raw's own bytes
// when it holds no escape and only valid UTF-8 (the common case), else a
// new slice, decoded as encoding/json decodes (invalid UTF-8 and lone
// surrogates become U+FFFD).
func text(raw []byte) []byte {
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return s
	}
	return appendDecoded(make([]byte, 0, len(s)), raw)
}

// appendDecoded appends the decoded text of the JSON string raw to dst.
func appendDecoded(dst, raw []byte) []byte {
	s := raw[1 : len(raw)-1]
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			switch e := s[i+1]; e {
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
					r2 := rune(-1)
					if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						r2 = hex4(s[i+2:])
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+n]...)
			}
			i += n
		}
	}
	return dst
}

// hex4 reads four hex digits (valid JSON guarantees them after \u).
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// path is where a value lies in the request ("messages[2].content[0].type"),
// kept as parts and spelled out only for an error, so that walking a
// request allocates no path strings.
type path struct {
	n    int
	keys [8]string
	idx  [8]int // index after keys[i]; -1: none
}

// key is p followed by .k (or k at the top).
func (p path) key(k string) path {
	p.keys[p.n], p.idx[p.n] = k, -1
	p.n++
	return p
}

// at is p followed by [i].
func (p path) at(i int) path {
	p.idx[p.n-1] = i
	return p
}

func (p path) String() string {
	var b []byte
	for i := range p.n {
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, p.keys[i]...)
		if p.idx[i] >= 0 {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(p.idx[i]), 10)
			b = append(b, ']')
		}
	}
	return string(b)
}
