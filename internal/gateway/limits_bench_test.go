package gateway

import (
	"net/http"
	"testing"

	"github.com/rolter/rolter/internal/resolve"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

type headerOnly struct{ h http.Header }

func (w *headerOnly) Header() http.Header         { return w.h }
func (w *headerOnly) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerOnly) WriteHeader(int)             {}

// BenchmarkLimitCheck is the rate limit step of one request whose key has
// an rpm and a tpm limit (far above the load): check, headers, correction.
func BenchmarkLimitCheck(b *testing.B) {
	g := New(Config{}, snapshot.NewHolder(nil, nil), Options{})
	proj := &snapshot.Project{Project: store.Project{ID: 1}}
	key := &snapshot.VirtualKey{VirtualKey: store.VirtualKey{ID: 1, ProjectID: 1, RPMLimit: 1_000_000_000, TPMLimit: 1_000_000_000}, Project: proj}
	body := chatBody(false)
	w := &headerOnly{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		x := &exchange{key: key, endpoint: "/chat/completions", plan: &routePlan{kind: resolve.KindProvider}}
		_ = x.body.scan(body, x.endpoint)
		if e := g.limit(b.Context(), w, x); e != nil {
			b.Fatal(e.Message)
		}
		x.promptTokens, x.outputTokens, x.status = 20, 10, 200
		g.settle(x)
	}
}
