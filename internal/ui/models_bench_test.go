package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// BenchmarkModelsPage measures the server time of the Models page over a
// project with 10,000 routes (issue 16: under 100 ms), for the first
// page, a search, and a deep page.
//
//	go test ./internal/ui -run '^$' -bench ModelsPage -benchtime 20x
func BenchmarkModelsPage(b *testing.B) {
	h, id := benchRoutes(b, 10_000)
	for _, c := range []struct{ name, query string }{
		{"first", ""},
		{"search", "&q=route-0999"},
		{"page50", "&page=50"},
	} {
		b.Run(c.name, func(b *testing.B) { benchPage(b, h, id, "/ui/models?org=default&project=default"+c.query) })
	}
}

// benchRoutes is a harness whose default project holds n routes to one
// provider, and a session id for it.
func benchRoutes(b *testing.B, n int) (*harness, string) {
	b.Helper()
	h := newHarness(b, Options{})
	ctx := context.Background()
	p, err := h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "p", Kind: "vllm", BaseURL: "http://10.0.0.5/v1", Models: []string{"m"}})
	if err != nil {
		b.Fatal(err)
	}
	org, err := h.db.GetOrg(ctx, "default")
	if err != nil {
		b.Fatal(err)
	}
	prov, err := h.db.GetProvider(ctx, org.ID, p.Slug)
	if err != nil {
		b.Fatal(err)
	}
	pj, err := h.db.GetProject(ctx, org.ID, "default")
	if err != nil {
		b.Fatal(err)
	}
	// Bulk setup straight into the store, then one snapshot rebuild:
	// 10,000 Service writes would each rebuild it. What is measured reads
	// through the Service as the pages always do.
	for i := range n {
		r := &store.Route{ProjectID: pj.ID, Model: fmt.Sprintf("route-%05d", i), Strategy: "weighted",
			Targets: []store.Target{{ProviderID: prov.ID, UpstreamModel: "m", Weight: 1}}}
		if err := h.db.CreateRoute(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	if err := h.snap.Reload(ctx); err != nil {
		b.Fatal(err)
	}
	scope, ok := h.svc.Authorize(h.token)
	if !ok {
		b.Fatal("token not authorized")
	}
	_, id := h.ui.sessions.create(secretOf(h.token), scope)
	return h, id
}

// benchPage serves path to session id, b.N times.
func benchPage(b *testing.B, h *harness, id, path string) {
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.AddCookie(&http.Cookie{Name: CookieName, Value: id})
		w := httptest.NewRecorder()
		h.ui.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body.String())
		}
	}
}
