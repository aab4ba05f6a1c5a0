package adminapi

// Patterns lists every route the handler serves, as "METHOD /path".
func (h *Handler) Patterns() []string { return append([]string(nil), h.patterns...) }
