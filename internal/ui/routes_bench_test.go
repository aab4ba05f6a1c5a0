package ui

import "testing"

// BenchmarkRoutesPage measures the server time of the Routes list over a
// project with 10,000 routes (issue 16: under 100 ms), for the first page,
// a search, a deep page, and the newest first.
//
//	go test ./internal/ui -run '^$' -bench RoutesPage -benchtime 20x
func BenchmarkRoutesPage(b *testing.B) {
	h, id := benchRoutes(b, 10_000)
	for _, c := range []struct{ name, query string }{
		{"first", ""},
		{"search", "&q=route-0999"},
		{"page100", "&page=100"},
		{"newest", "&sort=-updated"},
	} {
		b.Run(c.name, func(b *testing.B) { benchPage(b, h, id, "/ui/routes?org=default&project=default"+c.query) })
	}
}
