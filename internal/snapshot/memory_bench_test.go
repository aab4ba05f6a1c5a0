package snapshot_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

// heldBySnapshot keeps the last Holder of each BenchmarkHolderMemory run
// alive until the process ends, so that -memprofile's inuse_space shows
// what a Holder holds, site by site.
var heldBySnapshot []*snapshot.Holder

// BenchmarkHolderMemory loads a SQLite store seeded as `rolter bench
// --scenarios routes` seeds it (routes of one target each over min(routes,
// 10,000) providers of one org and project) into a Holder, as `rolter
// serve` does at start-up, and reports the heap the Holder keeps (its
// snapshot and the rows it patches), in bytes per route, after a
// collection (issue 21: RSS at 10,000 and 100,000 routes).
//
//	go test ./internal/snapshot -run '^$' -bench HolderMemory -benchmem \
//	    -memprofile /tmp/mem.out
//	go tool pprof -sample_index=inuse_space -top snapshot.test /tmp/mem.out
func BenchmarkHolderMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db, err := sqlstore.Open(ctx, "sqlite", b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			seedCatalog(b, db, n)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			var (
				h    *snapshot.Holder
				live uint64
				ms   runtime.MemStats
			)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				h = nil
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.HeapAlloc
				b.StartTimer()
				h = snapshot.NewHolder(db, log)
				if err := h.Reload(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				live = ms.HeapAlloc - before
				b.StartTimer()
			}
			b.StopTimer()
			if got := h.Current().Project(1).Routes.Len(); got != n {
				b.Fatalf("snapshot has %d routes, want %d", got, n)
			}
			heldBySnapshot = append(heldBySnapshot, h)
			b.ReportMetric(float64(live)/float64(n), "held-B/route")
		})
	}
}

// seedCatalog writes routes routes of one target each over min(routes,
// 10,000) providers, in bulk, into a store with one org and one project.
func seedCatalog(b *testing.B, db *sqlstore.DB, routes int) {
	b.Helper()
	ctx := context.Background()
	org := &store.Org{Name: "bench", Description: "created by the benchmark"}
	if err := db.CreateOrg(ctx, org); err != nil {
		b.Fatal(err)
	}
	proj := &store.Project{OrgID: org.ID, Name: "bench", Description: "created by the benchmark"}
	if err := db.CreateProject(ctx, proj); err != nil {
		b.Fatal(err)
	}
	ps := make([]*store.Provider, min(routes, 10_000))
	for i := range ps {
		ps[i] = &store.Provider{OrgID: org.ID, Slug: fmt.Sprintf("filler-%05d", i), Name: fmt.Sprintf("filler %d", i),
			Kind: store.KindVLLM, BaseURL: "http://127.0.0.1:1", MetadataSource: store.MetadataConfigured,
			Keys: []store.ProviderKey{{Secret: secret.New(fmt.Sprintf("sk-filler-%05d", i)), Weight: 1}}}
	}
	if err := db.CreateProviders(ctx, ps); err != nil {
		b.Fatal(err)
	}
	rs := make([]*store.Route, routes)
	for i := range rs {
		rs[i] = &store.Route{ProjectID: proj.ID, Model: fmt.Sprintf("filler-model-%06d", i), Strategy: "weighted",
			Targets: []store.Target{{ProviderID: ps[i%len(ps)].ID, UpstreamModel: "m", Weight: 1}}}
	}
	if err := db.CreateRoutes(ctx, rs); err != nil {
		b.Fatal(err)
	}
}
