package anthropic

import (
	"bytes"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/rolter/rolter/internal/jsonscan"
)

// The request translators read the body in place. The body is validated
// once, as a whole, with encoding/json's scanner; after that every value is
// a sub-slice of it, exactly as encoding/json would have handed it out as a
// json.RawMessage (no surrounding space), and nothing is copied or decoded
// into Go values: an object's members are indexed in a fixed table, arrays
// are walked element by element, and a string is kept as its raw JSON
// token, decoded rune by rune where it is compared (eqText, cmpText) or
// written (writer.text). So a request costs its output, whatever its
// blocks, escapes or invalid UTF-8.

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
	for {
		k, v, ok := it.next()
		if !ok {
			return nil
		}
		i := o.find(k)
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

// find returns the index in o.keys of the raw key k, -1 if none.
func (o *obj) find(k []byte) int {
	for i, key := range o.keys {
		if eqText(k, key) {
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

// otherKey is the smallest key outside o.keys whose last value is not null,
// clipped for an error message (see echo). Only a request with a field the
// translation refuses (or one repeated and then nulled) comes here. The
// members are sorted by key and position, so that the last value of each
// key is found without a map; their offsets are the only allocation, four
// bytes for a member of at least five.
func (o *obj) otherKey() (string, bool) {
	n := 0
	it := members{b: o.raw, i: 1}
	for k, _, ok := it.next(); ok; k, _, ok = it.next() {
		if o.find(k) < 0 {
			n++
		}
	}
	offs := make([]int32, 0, n)
	it = members{b: o.raw, i: 1}
	for {
		start := ws(o.raw, it.i)
		k, _, ok := it.next()
		if !ok {
			break
		}
		if o.raw[start] == ',' {
			start = ws(o.raw, start+1)
		}
		if o.find(k) < 0 {
			offs = append(offs, int32(start))
		}
	}
	key := func(off int32) []byte { return o.raw[off:skipStr(o.raw, int(off))] }
	slices.SortFunc(offs, func(x, y int32) int {
		if c := cmpText(key(x), key(y)); c != 0 {
			return c
		}
		return int(x - y)
	})
	for i, off := range offs {
		if i+1 < len(offs) && cmpText(key(off), key(offs[i+1])) == 0 {
			continue // not the last value of this key
		}
		it := members{b: o.raw, i: int(off)}
		k, v, _ := it.next()
		if !isNullRaw(v) {
			return echo(k), true
		}
	}
	return "", false
}

// str returns the string member key as its raw JSON token, quotes
// included: compare it with eqText, write it with writer.str.
func (o *obj) str(key string, p path) ([]byte, bool, error) {
	raw := o.get(key)
	if raw == nil {
		return nil, false, nil
	}
	if raw[0] != '"' {
		return nil, false, errf(p.key(key).String(), "must be a string, not %s", kind(raw))
	}
	return raw, true, nil
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
	if !fitsFloat64(raw) {
		return nil, false, errf(p.key(key).String(), "must be a number, not %s", kind(raw))
	}
	return raw, true, nil
}

// fitsFloat64 reports whether strconv.ParseFloat(raw, 64), which
// encoding/json uses, succeeds for the valid JSON number raw: whether it
// does not round past the largest float64. A long raw is not copied whole
// into a string for it: only the magnitude decides, and that only needs
// the first 309 digits (the largest float64's integer part).
func fitsFloat64(raw []byte) bool {
	if len(raw) <= 64 {
		_, err := strconv.ParseFloat(string(raw), 64)
		return err == nil
	}
	// The value is 0.D * 10^e, D the digits from the first non-zero one.
	const keep = 330 // digits of D kept
	var buf [keep + 32]byte
	d := append(buf[:0], "0."...)
	i, e, point, zero := 0, 0, false, true
	if raw[0] == '-' {
		i++
	}
	for ; i < len(raw) && raw[i] != 'e' && raw[i] != 'E'; i++ {
		switch c := raw[i]; {
		case c == '.':
			point = true
		case zero && c == '0':
			if point {
				e--
			}
		default:
			zero = false
			if !point {
				e++
			}
			if len(d) < 2+keep {
				d = append(d, c)
			}
		}
	}
	if zero {
		return true
	}
	if i < len(raw) { // exponent; capped far beyond what the digits shift
		i++
		neg := raw[i] == '-'
		if raw[i] == '+' || raw[i] == '-' {
			i++
		}
		x := 0
		for ; i < len(raw); i++ {
			if x < 1<<40 {
				x = x*10 + int(raw[i]-'0')
			}
		}
		if neg {
			x = -x
		}
		e += x
	}
	switch {
	case e < 300:
		return true
	case e > 310:
		return false
	}
	// The digits dropped are beyond the integer part: they cannot carry
	// the value over the rounding bound, an integer.
	d = append(d, 'e')
	d = strconv.AppendInt(d, int64(e), 10)
	_, err := strconv.ParseFloat(string(d), 64)
	return err == nil
}

func (o *obj) integer(key string, p path) (int64, bool, error) {
	raw := o.get(key)
	if raw == nil {
		return 0, false, nil
	}
	// As encoding/json reads a number into an int64: ParseInt, base 10.
	// No valid JSON integer that fits is longer than 20 bytes; a longer
	// one is not copied to be refused.
	if kind(raw) != "a number" || len(raw) > 20 {
		return 0, false, errf(p.key(key).String(), "must be an integer, not %s", kind(raw))
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
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

// eqText reports whether the JSON string raw (quotes included) decodes to
// lit, which must be ASCII. It decodes nothing into memory, and reads at
// most six bytes of raw per byte of lit (the longest escape of one).
func eqText(raw []byte, lit string) bool {
	s := raw[1 : len(raw)-1]
	if len(s) == len(lit) && string(s) == lit {
		return true
	}
	// Without an escape, s decodes to lit only if it is lit: its other
	// bytes decode to themselves or to runes beyond ASCII.
	if len(s) > 6*len(lit) || bytes.IndexByte(s, '\\') < 0 {
		return false
	}
	j := 0
	for i := 0; i < len(s); j++ {
		r, n := jsonscan.DecodeRune(s, i)
		if j >= len(lit) || r != rune(lit[j]) {
			return false
		}
		i += n
	}
	return j == len(lit)
}

// cmpText compares the decoded texts of the JSON strings a and b as Go
// compares strings (byte-wise on UTF-8, which orders as the runes do).
func cmpText(a, b []byte) int {
	a, b = a[1:len(a)-1], b[1:len(b)-1]
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ra, n := jsonscan.DecodeRune(a, i)
		rb, m := jsonscan.DecodeRune(b, j)
		if ra != rb {
			if ra < rb {
				return -1
			}
			return 1
		}
		i, j = i+n, j+m
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	return 0
}

// maxEcho is the most bytes of a client's value an error message repeats.
const maxEcho = 100

// echo returns the decoded text of the JSON string raw for an error
// message: whole, or its first runes up to maxEcho bytes followed by "...",
// so that a refusal costs nothing near the size of what it refuses.
func echo(raw []byte) string {
	s := raw[1 : len(raw)-1]
	var b []byte
	for i := 0; i < len(s); {
		r, n := jsonscan.DecodeRune(s, i)
		if len(b)+utf8.RuneLen(r) > maxEcho {
			return string(b) + "..."
		}
		b = utf8.AppendRune(b, r)
		i += n
	}
	return string(b)
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
