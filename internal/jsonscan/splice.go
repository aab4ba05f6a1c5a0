package jsonscan

// Edit replaces doc[Start:End] with Value; Start == End inserts.
type Edit struct {
	Start, End int
	Value      []byte
}

// Splice appends doc with edits applied to dst[:0] and returns it: every
// byte outside the edited spans is copied as it was, in one pass. edits
// must not overlap; they are applied in the order of their Start (edits at
// the same offset in the order given), so a caller may collect them in any
// order. dst must not overlap doc.
func Splice(dst, doc []byte, edits []Edit) []byte {
	// Insertion sort: a request has a handful of edits, and it keeps
	// inserts at one offset in the order given.
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && edits[j].Start < edits[j-1].Start; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	n := len(doc)
	for _, e := range edits {
		n += len(e.Value) - (e.End - e.Start)
	}
	out := dst[:0]
	if cap(out) < n {
		out = make([]byte, 0, n)
	}
	prev := 0
	for _, e := range edits {
		out = append(out, doc[prev:e.Start]...)
		out = append(out, e.Value...)
		prev = e.End
	}
	return append(out, doc[prev:]...)
}
