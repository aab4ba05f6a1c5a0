package gateway

import (
	"net/http"
	"runtime"
	"testing"
	"time"
)

// BenchmarkAccount is what a request's end costs the gateway beside the
// upstream exchange: usage record (discarded here) and the metric updates
// of a successful request and its one attempt. Compare a change of the
// metrics with its parent (docs/observability.md has the figures).
func BenchmarkAccount(b *testing.B) {
	e := newBenchEnv(b, 10)
	g := e.gw
	g.usage = discardUsage{}
	t := g.table.Load()
	req, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	req.Header.Set("Authorization", e.key)
	key, ok := authenticate(t.snap, req, time.Now())
	if !ok {
		b.Fatal("no key")
	}
	plan, aerr := g.resolve(t, key, "bench", "")
	if aerr != nil {
		b.Fatal(aerr.Message)
	}
	tg := plan.targets[0]
	b.ReportAllocs()
	for b.Loop() {
		x := &exchange{start: time.Now(), requestID: "req-1", key: key, model: "bench", plan: plan, target: tg,
			status: 200, attempts: 1, ttft: time.Millisecond, promptTokens: 12, outputTokens: 34}
		benchAttemptEnd(g, x, tg)
		g.account(x)
	}
}

// benchAttemptEnd is the metric work at the end of one successful attempt,
// as forward does it.
func benchAttemptEnd(g *Gateway, x *exchange, tg *targetRT) {
	x.upstreamTTFB = time.Millisecond
	g.observeAttempt(x, tg, result{}, x.start)
}

// BenchmarkProviderMemory is what the routing table holds per provider
// (issue 21), at 10,000 routes over 10,000 providers, each with its own
// key, none of which has served a request: the providers' runtime alone
// (providerRT-B/provider: providerRT, keys, their breakers) and a whole
// table (table-B/provider, its routes' plans included; the deployments'
// lasting state is shared between tables and not counted). Bytes are the
// heap after a collection. Numbers are for comparing a change with its
// parent, never asserted.
func BenchmarkProviderMemory(b *testing.B) {
	const n = 10_000
	e := newBenchEnv(b, n+1)
	g, s := e.gw, e.snap.Current()
	o := s.Org("default")
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var rts, tables, count float64
	var keep []any
	b.ReportAllocs()
	for b.Loop() {
		ed := g.edit(s, nil, g.table.Load())
		ps := make([]*providerRT, 0, o.Providers.Len())
		h0 := heap()
		for _, p := range o.Providers.All() {
			ps = append(ps, ed.providerOf(o, p))
		}
		h1 := heap()
		t := g.buildTable(s, nil)
		h2 := heap()
		rts += float64(h1 - h0)
		tables += float64(h2 - h1)
		count += float64(len(ps))
		keep = append(keep, ps, t, ed)
	}
	runtime.KeepAlive(keep)
	b.ReportMetric(rts/count, "providerRT-B/provider")
	b.ReportMetric(tables/count, "table-B/provider")
}
