package gateway

import (
	"net/http"
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
