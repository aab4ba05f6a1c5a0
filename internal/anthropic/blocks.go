package anthropic

// blockIter walks the content blocks (or parts) of a JSON array: each is
// counted against MaxBlocks, decoded as an object whose members may be any of
// keys, and its required "type" read, in that order, so every translator
// reports the same first error for the same block.
type blockIter struct {
	w    *writer
	it   elems
	p    path // the array's path
	keys []string
	i    int

	o   obj    // the current block
	at  path   // its path
	typ []byte // its type, a JSON string
	err error  // what stopped the walk early; nil at the end of the array

	anthropic bool   // the blocks are Anthropic's: text blocks are checked
	text      []byte // a checked text block's text (a JSON string)
}

// walkBlocks walks raw, a JSON array at p.
func (w *writer) walkBlocks(raw []byte, p path, keys []string) blockIter {
	return blockIter{w: w, it: arrayElems(raw), p: p, keys: keys}
}

// walkAnthropicBlocks walks raw, an array of Anthropic content blocks at p,
// on their way to OpenAI: a text block is also checked by textBlock, and
// its text is in bi.text.
func (w *writer) walkAnthropicBlocks(raw []byte, p path) blockIter {
	return blockIter{w: w, it: arrayElems(raw), p: p, keys: keysBlock, anthropic: true}
}

// next moves to the next block. It reports false at the end of the array or
// on the first error, which is then in bi.err.
func (bi *blockIter) next() bool {
	b, ok := bi.it.next()
	if !ok {
		return false
	}
	bi.at = bi.p.at(bi.i)
	bi.i++
	if bi.err = bi.w.block(bi.at); bi.err != nil {
		return false
	}
	if bi.err = decodeObj(&bi.o, b, bi.at, bi.keys); bi.err != nil {
		return false
	}
	if bi.typ, bi.err = bi.o.reqStr("type", bi.at); bi.err != nil {
		return false
	}
	if bi.anthropic && eqText(bi.typ, "text") {
		bi.text, bi.err = textBlock(&bi.o, bi.at)
	}
	return bi.err == nil
}

// textOnlyBlocks adds the text of each block of raw, an array at p, to ts. A
// block of another type is an error told with notText, a format for its type.
func (w *writer) textOnlyBlocks(raw []byte, p path, ts *texts, notText string) error {
	bi := w.walkAnthropicBlocks(raw, p)
	for bi.next() {
		if !eqText(bi.typ, "text") {
			return errf(bi.at.key("type").String(), notText, echo(bi.typ))
		}
		ts.add(w, bi.text)
	}
	return bi.err
}
