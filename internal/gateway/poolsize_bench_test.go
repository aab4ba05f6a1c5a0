package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rolter/rolter/internal/demo"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// poolSizes are the route sizes BenchmarkPoolSize compares (issue 24: CPU
// per request at 1,000 targets within 10% of 10).
var poolSizes = []int{10, 100, 1000}

// newPoolEnv is a gateway whose route "bench" has n targets, each its own
// provider, all in front of one demo upstream.
func newPoolEnv(b *testing.B, n int, strategy string) (*benchEnv, *Gateway) {
	b.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := storetest.Open(b, "sqlite", nil)
	_, err := db.SQL().ExecContext(ctx, "PRAGMA synchronous=OFF") // a throwaway store
	benchCheck(b, err)
	org := &store.Org{Name: "default"}
	benchCheck(b, db.CreateOrg(ctx, org))
	proj := &store.Project{OrgID: org.ID, Name: "default"}
	benchCheck(b, db.CreateProject(ctx, proj))
	up := httptest.NewServer(demo.New(demo.Options{}))
	b.Cleanup(up.Close)
	targets := make([]store.Target, n)
	for i := range targets {
		p := &store.Provider{OrgID: org.ID, Slug: fmt.Sprintf("box-%05d", i), Name: "box", Kind: "vllm", BaseURL: up.URL + "/v1",
			MetadataSource: "configured", Keys: []store.ProviderKey{{Secret: secret.New("sk-demo"), Weight: 1}}}
		benchCheck(b, db.CreateProvider(ctx, p))
		targets[i] = store.Target{ProviderID: p.ID, UpstreamModel: demo.ModelID, Weight: 1}
	}
	benchCheck(b, db.CreateRoute(ctx, &store.Route{ProjectID: proj.ID, Model: "bench", Strategy: strategy, Targets: targets}))
	tok, lookup := secret.Mint(secret.PrefixVirtualKey)
	benchCheck(b, db.CreateVirtualKey(ctx, &store.VirtualKey{ProjectID: proj.ID, Name: "bench", Lookup: lookup, Hash: secret.HashOf(tok.Reveal())}))
	snap := snapshot.NewHolder(db, log)
	benchCheck(b, snap.Reload(ctx))
	gw := New(Config{}, snap, Options{Log: log})
	srv := httptest.NewServer(gw)
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
		gw.client.CloseIdleConnections()
	})
	return &benchEnv{url: srv.URL + "/v1/chat/completions", key: "Bearer " + tok.Reveal(), client: &http.Client{Transport: tr}, snap: snap}, gw
}

// BenchmarkPoolSize is one non-streamed chat request at a time over real
// loopback HTTP to a route of 10, 100 and 1,000 targets: the request's
// cost must not grow with the pool. The client and the upstream run in
// this process, so ns/op includes their work too; it is the same at every
// size.
//
//	go test ./internal/gateway -run '^$' -bench PoolSize -benchtime 3s
func BenchmarkPoolSize(b *testing.B) {
	for _, n := range poolSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			e, _ := newPoolEnv(b, n, "weighted")
			body := chatBody(false)
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				e.post(b, body, 1, &buf)
			}
		})
	}
}

// BenchmarkPoolSizeRouting is the part of a request that depends on the
// pool, below HTTP: admission and picking a target, for each strategy.
func BenchmarkPoolSizeRouting(b *testing.B) {
	body := chatBody(false)
	for _, strategy := range []string{"weighted", "round_robin", "least_busy", "latency"} {
		for _, n := range poolSizes {
			b.Run(fmt.Sprintf("%s/%d", strategy, n), func(b *testing.B) {
				_, g := newPoolEnv(b, n, strategy)
				t := g.table.Load()
				var plan *routePlan
				for _, p := range allPlans(t) {
					plan = p
				}
				b.ReportAllocs()
				for b.Loop() {
					x := &exchange{endpoint: "/chat/completions", plan: plan, model: "bench"}
					if err := x.body.scan(body, x.endpoint); err != nil {
						b.Fatal(err)
					}
					if _, e := g.admit(x); e != nil {
						b.Fatal(e.Message)
					}
					if i, _ := g.pickTarget(x, newExclusions(x)); i < 0 {
						b.Fatal("no target")
					}
				}
			})
		}
	}
}
