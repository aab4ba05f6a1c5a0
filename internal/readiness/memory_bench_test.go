package readiness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// BenchmarkCacheMemory is what the cache holds per provider (issue 21):
// ten thousand configured providers, each with its own key, on one
// endpoint (as `rolter bench` seeds them), synced once and then again with
// the same list (every configuration change syncs), then probed once. It
// reports the heap each provider keeps (B/provider, after a collection)
// at each step. Numbers are for comparing a change with its parent, never
// asserted. Where the bytes are allocated:
//
//	go test ./internal/readiness -run '^$' -bench CacheMemory -benchtime 1x \
//	    -memprofile mem.out -memprofilerate 1
//	go tool pprof -sample_index alloc_space -top -focus 'Sync' mem.out
func BenchmarkCacheMemory(b *testing.B) {
	const n = 10_000
	eng := &fakeEngine{routes: map[string]cannedResponse{"/health": {200, ""}}, counts: map[string]int{}, headers: map[string]http.Header{}}
	srv := httptest.NewServer(http.HandlerFunc(eng.serve))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	var d net.Dialer // as rolter serve: probes that close their connection use the cache's own client
	ps := make([]Provider, n)
	for i := range ps {
		ps[i] = Provider{ID: int64(i + 1), Kind: store.KindVLLM, BaseURL: srv.URL + "/v1", Org: "default",
			Slug: fmt.Sprintf("filler-%05d", i), Credential: secret.New(fmt.Sprintf("sk-filler-%05d", i))}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var synced, resynced, probed float64
	var keep []*Cache
	b.ReportAllocs()
	for b.Loop() {
		h0 := heap()
		c := New(Config{Dial: d.DialContext}, nil, &http.Client{Transport: tr}, nil)
		c.Sync(ps)
		h1 := heap()
		c.Sync(ps)
		h2 := heap()
		c.ProbeAll(context.Background())
		h3 := heap()
		synced += float64(h1 - h0)
		resynced += float64(h2 - h0)
		probed += float64(h3 - h0)
		keep = append(keep, c)
	}
	for _, c := range keep {
		c.closeIdle()
	}
	runtime.KeepAlive(keep)
	per := float64(b.N) * n
	b.ReportMetric(synced/per, "synced-B/provider")
	b.ReportMetric(resynced/per, "resynced-B/provider")
	b.ReportMetric(probed/per, "probed-B/provider")
}

// BenchmarkResync is what every configuration change costs the cache at
// 10,000 providers: Sync with the same list (a change to routes, keys or
// policies), and with one provider renamed each time.
func BenchmarkResync(b *testing.B) {
	const n = 10_000
	ps := make([]Provider, n)
	for i := range ps {
		ps[i] = Provider{ID: int64(i + 1), Kind: store.KindVLLM, BaseURL: "http://10.0.0.1:8000/v1", Org: "default",
			Slug: fmt.Sprintf("filler-%05d", i), Credential: secret.New(fmt.Sprintf("sk-filler-%05d", i))}
	}
	for _, change := range []bool{false, true} {
		b.Run(fmt.Sprintf("changed=%v", change), func(b *testing.B) {
			c := New(Config{}, nil, nil, nil)
			c.Sync(ps)
			slugs := [2]string{ps[0].Slug, "renamed"}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if change {
					ps[0].Slug = slugs[i%2]
				}
				c.Sync(ps)
			}
		})
	}
}
