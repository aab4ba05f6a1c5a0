package policy

import (
	"unicode"
	"unicode/utf8"
)

// seg accumulates the lower bound of one piece of text the model reads (see
// the package documentation for the argument). gaps counts, within each
// string, the runs of spaces that have a visible character on both sides;
// any records that some visible character was seen. The bound of a set of
// strings is the sum of their gaps plus one if any of them is visible: every
// string boundary is treated as if the strings were glued together with
// nothing between them.
type seg struct {
	gaps  int
	any   bool
	vis   bool  // a visible character was seen in the current string
	space bool  // a space was seen since the last visible character
	tag   uint8 // how much of thinkEnd the text just seen matches
}

// thinkEnd is where reasoning ends in assistant turns. Qwen3's and
// DeepSeek-R1's chat templates render only what follows its last occurrence
// in earlier assistant turns, so counting restarts after it.
const thinkEnd = "</think>"

// class of an ASCII byte for counting.
const (
	clsInvisible = iota // control characters: may be normalised away
	clsSpace            // U+0020, the only separator every tokenizer family honours
	clsVisible          // printable ASCII
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := 0x21; c < 0x7f; c++ {
		t[c] = clsVisible
	}
	t[' '] = clsSpace
	return t
}()

// wordByte marks the bytes that continue a word without changing the
// state: printable ASCII other than the quote, the backslash and '<'.
var wordByte = func() (t [256]bool) {
	for c := 0x21; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<'
	}
	return t
}()

// begin starts a new string: its first field may be glued to the previous
// string's last one, so no gap is counted before it.
func (s *seg) begin() { s.vis, s.space = false, false }

func (s *seg) bound() int {
	if !s.any {
		return 0
	}
	return s.gaps + 1
}

func (s *seg) add(o seg) {
	s.gaps += o.gaps
	s.any = s.any || o.any
}

func (s *seg) visible() {
	if s.vis && s.space {
		s.gaps++
	}
	s.vis, s.space, s.any = true, false, true
}

// ascii feeds one ASCII character.
func (s *seg) ascii(c byte, think bool) {
	switch asciiClass[c] {
	case clsSpace:
		if s.vis {
			s.space = true
		}
	case clsVisible:
		s.visible()
	}
	if think {
		switch {
		case c == thinkEnd[s.tag]:
			if s.tag++; int(s.tag) == len(thinkEnd) {
				// Everything so far in this message is dropped by the
				// template; what follows starts afresh.
				*s = seg{}
			}
		case c == '<':
			s.tag = 1
		default:
			s.tag = 0
		}
	}
}

// other feeds one non-ASCII character. Only letters, digits, punctuation
// and symbols count as visible: normalisers (NFKC, BERT's clean-up) can
// delete control, format, private-use and unassigned characters and map
// exotic spaces, so a field made only of those may become no token at all.
func (s *seg) other(r rune) {
	s.tag = 0
	if r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsPunct(r) || unicode.IsSymbol(r)) {
		s.visible()
	}
}

// text validates the string at b[i] and feeds its decoded contents to s as a
// new string. think enables the thinkEnd reset.
func (p *parser) text(i int, s *seg, think bool) (int, error) {
	b := p.b
	s.begin()
	for i++; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if _, err := p.escLen(i); err != nil {
				return 0, err
			}
			// decodeRune joins a surrogate pair spanning two escapes;
			// it only does so when the second one is well-formed.
			r, n := decodeRune(b, i)
			if r < utf8.RuneSelf {
				s.ascii(byte(r), think)
			} else {
				s.other(r)
			}
			i += n
		case c < 0x20:
			return 0, p.errAt(i, "control character in string")
		case c < utf8.RuneSelf:
			s.ascii(c, think)
			i++
			// The rest of a word, or of a run of spaces, changes nothing
			// (a '<' may start thinkEnd, a quote or backslash ends the
			// plain run).
			switch {
			case c == ' ':
				for i < len(b) && b[i] == ' ' {
					i++
				}
			case s.vis && !s.space && s.tag == 0:
				for i < len(b) && wordByte[b[i]] {
					i++
				}
			}
		default:
			r, n := utf8.DecodeRune(b[i:])
			s.other(r)
			i += n
		}
	}
	return 0, p.eof()
}
