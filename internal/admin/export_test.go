package admin

import "time"

// SetClock replaces the service's clock (expiry checks, revocation times).
func (s *Service) SetClock(now func() time.Time) { s.now = now }

// Patterns lists every route the handler serves, as "METHOD /path".
func (h *Handler) Patterns() []string { return append([]string(nil), h.patterns...) }
