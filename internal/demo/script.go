package demo

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// script returns the completion split into n pieces, from the cache when it
// can.
func (h *handler) script(n int) *script {
	if n == h.opts.Chunks {
		return h.def
	}
	if s, ok := h.scripts.Load(n); ok {
		return s.(*script)
	}
	s := h.buildScript(n)
	if h.scriptCount.Add(1) <= maxCachedScripts {
		if prev, loaded := h.scripts.LoadOrStore(n, s); loaded {
			h.scriptCount.Add(-1)
			return prev.(*script)
		}
	}
	return s
}

// buildScript splits the text into n non-empty pieces at word boundaries,
// like a tokenizer that emits whole words. When n exceeds the word count the
// text is repeated until there are enough words, so large chunk counts still
// simulate long generations instead of being silently capped.
func (h *handler) buildScript(n int) *script {
	words := h.words
	if len(words) < n {
		ext := make([]string, 0, n+len(h.words))
		for len(ext) < n {
			for i, wd := range h.words {
				// Keep a separator between repetitions.
				if len(ext) > 0 && i == 0 {
					if last := ext[len(ext)-1]; !endsWithSpace(last) {
						ext[len(ext)-1] = last + " "
					}
				}
				ext = append(ext, wd)
			}
		}
		words = ext
	}
	s := &script{raw: make([]string, n), encoded: make([][]byte, n)}
	var sb strings.Builder
	for i := range n {
		// Even split: piece i gets words [i*W/n, (i+1)*W/n), never empty
		// because W >= n.
		lo, hi := i*len(words)/n, (i+1)*len(words)/n
		s.raw[i] = strings.Join(words[lo:hi], "")
		s.encoded[i] = mustJSON(s.raw[i])
		sb.WriteString(s.raw[i])
	}
	s.joined = sb.String()
	return s
}

// splitWords cuts text into words that each carry their trailing whitespace
// (the first also carries any leading whitespace), so the words concatenate
// back to text exactly.
func splitWords(text string) []string {
	var words []string
	start := 0
	prevSpace := false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if !space && prevSpace && i > 0 && strings.TrimSpace(text[start:i]) != "" {
			words = append(words, text[start:i])
			start = i
		}
		prevSpace = space
	}
	return append(words, text[start:])
}

func endsWithSpace(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsSpace(r)
}
