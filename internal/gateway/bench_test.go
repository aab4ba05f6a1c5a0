package gateway

// Benchmarks of the data path for profiling (issue 8). They drive the
// gateway over real loopback HTTP, in front of the demo upstream, with a
// real SQLite store and usage recorder, as `rolter serve` wires them:
//
//	go test ./internal/gateway -run '^$' -bench 'Serve' -benchtime 5s \
//	    -cpuprofile cpu.out -memprofile mem.out
//	go tool pprof -top -focus 'gateway\.' cpu.out
//
// The client and the upstream run in this process too, so a profile holds
// their net/http work as well; focus on gateway frames, or profile the real
// process with `rolter bench` (docs/performance.md). Numbers here are for
// comparing a change with its parent, never asserted.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/demo"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/sse"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/usage"
)

// benchEnv is a gateway with one route, "bench", to the demo upstream, and
// a catalog of filler routes.
type benchEnv struct {
	url    string // the gateway's /v1/chat/completions
	key    string
	client *http.Client
	snap   *snapshot.Holder
	db     *sqlstore.DB
	gw     *Gateway
}

func benchCheck(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// newBenchEnv builds the environment; routes counts the catalog's routes,
// "bench" included, over min(routes-1, 10,000) filler providers.
// upstream, when given, is the gateway's upstream transport (default:
// its own, h1client).
func newBenchEnv(b *testing.B, routes int, upstream ...http.RoundTripper) *benchEnv {
	b.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := storetest.Open(b, "sqlite", nil)
	_, err := db.SQL().ExecContext(ctx, "PRAGMA synchronous=OFF") // a throwaway store; see internal/bench/seed.go
	benchCheck(b, err)
	org := &store.Org{Name: "default"}
	benchCheck(b, db.CreateOrg(ctx, org))
	proj := &store.Project{OrgID: org.ID, Name: "default"}
	benchCheck(b, db.CreateProject(ctx, proj))

	up := httptest.NewServer(demo.New(demo.Options{}))
	b.Cleanup(up.Close)
	p := &store.Provider{OrgID: org.ID, Slug: "demo", Name: "demo", Kind: "vllm", BaseURL: up.URL + "/v1", MetadataSource: "configured",
		Settings: store.ProviderSettings{ForwardHeaders: []string{"X-Demo-*"}},
		Keys:     []store.ProviderKey{{Secret: secret.New("sk-demo"), Weight: 1}}}
	benchCheck(b, db.CreateProvider(ctx, p))
	benchCheck(b, db.CreateRoute(ctx, &store.Route{ProjectID: proj.ID, Model: "bench", Strategy: "weighted",
		Targets: []store.Target{{ProviderID: p.ID, UpstreamModel: demo.ModelID, Weight: 1}}}))
	fillers := make([]int64, min(routes-1, 10000))
	for i := range fillers {
		fp := &store.Provider{OrgID: org.ID, Slug: fmt.Sprintf("filler-%05d", i), Name: "filler", Kind: "vllm",
			BaseURL: up.URL + "/v1", MetadataSource: "configured", Keys: []store.ProviderKey{{Secret: secret.New("sk-f"), Weight: 1}}}
		benchCheck(b, db.CreateProvider(ctx, fp))
		fillers[i] = fp.ID
	}
	for i := range routes - 1 {
		benchCheck(b, db.CreateRoute(ctx, &store.Route{ProjectID: proj.ID, Model: fmt.Sprintf("filler-model-%06d", i), Strategy: "weighted",
			Targets: []store.Target{{ProviderID: fillers[i%len(fillers)], UpstreamModel: "m", Weight: 1}}}))
	}
	tok, lookup := secret.Mint(secret.PrefixVirtualKey)
	benchCheck(b, db.CreateVirtualKey(ctx, &store.VirtualKey{ProjectID: proj.ID, Name: "bench", Lookup: lookup, Hash: secret.HashOf(tok.Reveal())}))

	snap := snapshot.NewHolder(db, log)
	benchCheck(b, snap.Reload(ctx))
	rec := usage.New(db, usage.Config{}, log)
	bg, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rec.Run(bg) }()
	o := Options{Log: log, Usage: rec}
	if len(upstream) > 0 {
		o.Transport = upstream[0]
	}
	gw := New(Config{}, snap, o)
	srv := httptest.NewServer(gw)
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
		gw.client.CloseIdleConnections()
		stop()
		<-done
	})
	return &benchEnv{url: srv.URL + "/v1/chat/completions", key: "Bearer " + tok.Reveal(), client: &http.Client{Transport: tr}, snap: snap, db: db, gw: gw}
}

// post sends one chat request and reads the whole answer into buf.
func (e *benchEnv) post(b *testing.B, body []byte, chunks int, buf *bytes.Buffer) {
	req, err := http.NewRequest(http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", e.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Demo-Chunks", strconv.Itoa(chunks))
	resp, err := e.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d, %v: %s", resp.StatusCode, err, buf.Bytes())
	}
}

func chatBody(stream bool) []byte {
	return fmt.Appendf(nil, `{"model":"bench","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":256,"temperature":0.7,"stream":%t}`, stream)
}

// BenchmarkServe is one request at a time: non-streamed chat, and streamed
// chat with 20 content chunks (the scenarios).
func BenchmarkServe(b *testing.B) {
	for _, c := range []struct {
		name   string
		stream bool
	}{{"chat", false}, {"stream", true}} {
		b.Run(c.name, func(b *testing.B) {
			e := newBenchEnv(b, 10)
			body := chatBody(c.stream)
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				e.post(b, body, 20, &buf)
			}
		})
	}
}

// BenchmarkUpstreamClient is BenchmarkServe with the gateway's upstream
// client (h1client) and with a stock net/http Transport of the same
// settings, to compare the two (issue 21).
func BenchmarkUpstreamClient(b *testing.B) {
	for _, c := range []struct {
		name   string
		stream bool
	}{{"chat", false}, {"stream", true}} {
		for _, tr := range []string{"h1client", "net-http"} {
			b.Run(c.name+"/"+tr, func(b *testing.B) {
				var e *benchEnv
				if tr == "net-http" {
					e = newBenchEnv(b, 10, NewTransport(false))
				} else {
					e = newBenchEnv(b, 10)
				}
				body := chatBody(c.stream)
				var buf bytes.Buffer
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					e.post(b, body, 20, &buf)
				}
				// The whole process: client, gateway and upstream. Only the
				// gateway's upstream client differs between the two runs.
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// minorFaults is the process's minor page faults so far: the pages the
// heap touched for the first time (or again, after returning them).
func minorFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Minflt
}

// BenchmarkServeParallel is the same with 8 requests in flight per CPU.
func BenchmarkServeParallel(b *testing.B) {
	for _, c := range []struct {
		name   string
		stream bool
	}{{"chat", false}, {"stream", true}} {
		b.Run(c.name, func(b *testing.B) {
			e := newBenchEnv(b, 10)
			body := chatBody(c.stream)
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				var buf bytes.Buffer
				for pb.Next() {
					e.post(b, body, 20, &buf)
				}
			})
		})
	}
}

// BenchmarkRebuild is what every admin write costs before it answers: one
// route updated in the store, then the reload: read what changed (the
// change journal), build the snapshot, rebuild the gateway's table.
// 100,000 routes take a while to seed, so -short skips that size.
func BenchmarkRebuild(b *testing.B) {
	for _, n := range []int{10, 10_000, 100_000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			if n > 10_000 && testing.Short() {
				b.Skip("seeding 100,000 routes is slow; run without -short")
			}
			e := newBenchEnv(b, n)
			ctx := context.Background()
			proj, err := e.db.GetProject(ctx, e.snap.Current().Org("default").ID, "default")
			benchCheck(b, err)
			r, err := e.db.GetRoute(ctx, proj.ID, "bench")
			benchCheck(b, err)
			b.ReportAllocs()
			for b.Loop() {
				r.Policy.MaxOutputTokens++
				benchCheck(b, e.db.UpdateRoute(ctx, r))
				benchCheck(b, e.snap.Reload(ctx))
			}
		})
	}
}

// Micro-benchmarks of the per-request and per-event functions the profiles
// of BenchmarkServe show (docs/performance.md has the figures).

// vllmChunk is a content chunk as vLLM (and the demo) stream it.
const vllmChunk = `data: {"id":"chatcmpl-demo-1","object":"chat.completion.chunk","created":1735689600,"model":"demo-model","choices":[{"index":0,"delta":{"content":"Hello "},"logprobs":null,"finish_reason":null}]}` + "\n\n"

// BenchmarkRelayEvent is the work relay does on every streamed event: look
// for usage, rewrite the model.
func BenchmarkRelayEvent(b *testing.B) {
	rd := sse.NewReader(strings.NewReader(vllmChunk), 0)
	ev, err := rd.Next()
	benchCheck(b, err)
	x := &exchange{model: "bench"}
	var o outcome
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var drop bool
		if buf, drop = x.relayEvent(buf[:0], ev, "", &o); drop {
			b.Fatal("not a usage chunk")
		}
	}
}

// BenchmarkUsageOf reads the model span and token counts from a
// non-streamed response (one scan).
func BenchmarkUsageOf(b *testing.B) {
	doc := []byte(vllmChatResponse)
	b.ReportAllocs()
	for b.Loop() {
		if rs, _ := scanResponse(doc); func() int { p, _ := rs.usage(doc); return p }() != 12 {
			b.Fatal("wrong usage")
		}
	}
}

// BenchmarkCopyHeaders copies a typical upstream response's headers.
func BenchmarkCopyHeaders(b *testing.B) {
	src := http.Header{"Content-Type": {"application/json"}, "Date": {"Sat, 29 Nov 2026 18:00:00 GMT"},
		"Content-Length": {"512"}, "Server": {"uvicorn"}, "X-Request-Id": {"abc"}}
	b.ReportAllocs()
	for b.Loop() {
		copyResponseHeaders(http.Header{}, src)
	}
}

// BenchmarkServeCatalog is BenchmarkServe's non-streamed chat with catalogs
// of 10, 10,000 and 100,000 routes (issue 21: the per-request cost must
// not grow with the catalog). cpu-µs/op is the whole process's (client
// and upstream included, the same at every size); gc/op counts collection
// cycles per request. 100,000 routes take a while to seed, so -short
// skips that size.
func BenchmarkServeCatalog(b *testing.B) {
	for _, n := range []int{10, 10_000, 100_000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			if n > 10_000 && testing.Short() {
				b.Skip("seeding 100,000 routes is slow; run without -short")
			}
			e := newBenchEnv(b, n)
			body := chatBody(false)
			var buf bytes.Buffer
			for range 200 { // warm the connections and the pools
				e.post(b, body, 20, &buf)
			}
			runtime.GC()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ReportAllocs()
			cpu0, flt0 := processCPU(), minorFaults()
			for b.Loop() {
				e.post(b, body, 20, &buf)
			}
			cpu := processCPU() - cpu0
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(ms1.NumGC-ms0.NumGC)/float64(b.N), "gc/op")
			b.ReportMetric(float64(minorFaults()-flt0)/float64(b.N), "faults/op")
			b.ReportMetric(float64(ms1.HeapAlloc)/(1<<20), "heap-MB")
		})
	}
}
