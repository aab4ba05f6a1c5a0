package anthropic

// Helpers both request translators use to check and write the fields the two
// APIs share.

// toolFunc checks one tool at p and, with a non-nil writer, writes it in the
// other API's shape.
type toolFunc func(w *writer, raw []byte, p path) error

// checkTools reads the request's tools, a JSON array or absent, and checks
// each with check, in order. It returns the array (nil when absent) and its
// path.
func checkTools(req *obj, root path, check toolFunc) ([]byte, path, error) {
	tp := root.key("tools")
	tools, _, err := req.array("tools", root)
	if err != nil {
		return nil, tp, err
	}
	it := arrayElems(tools)
	for i := 0; tools != nil; i++ {
		raw, ok := it.next()
		if !ok {
			break
		}
		if err := check(nil, raw, tp.at(i)); err != nil {
			return nil, tp, err
		}
	}
	return tools, tp, nil
}

// toolsField writes ,"tools":[...] unless tools is nil or empty. The tools
// were checked by checkTools, so write does not fail.
func (w *writer) toolsField(tools []byte, tp path, write toolFunc) {
	if tools == nil || isEmptyArray(tools) {
		return
	}
	w.lit(`,"tools":[`)
	it, n := arrayElems(tools), 0
	for raw, ok := it.next(); ok; raw, ok = it.next() {
		w.sep(&n)
		_ = write(w, raw, tp)
	}
	w.lit("]")
}

// sampling holds the sampling fields the two APIs name and mean alike, so
// they are carried over unchanged: temperature and top_p as their JSON
// numbers (nil when absent), top_k as an integer.
type sampling struct {
	temperature, topP []byte
	topK              int64
	hasTopK           bool
}

// checkSampling reads the request's sampling fields, in the order the
// map-based translation checked them (temperature, top_p, top_k), so that a
// request with several mistakes is told the same one.
func checkSampling(req *obj, root path) (sampling, error) {
	var (
		s   sampling
		err error
	)
	if s.temperature, _, err = req.number("temperature", root); err != nil {
		return s, err
	}
	if s.topP, _, err = req.number("top_p", root); err != nil {
		return s, err
	}
	s.topK, s.hasTopK, err = req.integer("top_k", root)
	return s, err
}

// rawField writes ,"key":v unless v is nil.
func (w *writer) rawField(key string, v []byte) {
	if v == nil {
		return
	}
	w.lit(`,"`)
	w.lit(key)
	w.lit(`":`)
	w.put(v)
}

// intField writes ,"key":v when ok.
func (w *writer) intField(key string, v int64, ok bool) {
	if !ok {
		return
	}
	w.lit(`,"`)
	w.lit(key)
	w.lit(`":`)
	w.int(v)
}
