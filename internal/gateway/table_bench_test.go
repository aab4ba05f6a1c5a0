package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// catalogState is the catalog `rolter bench` seeds for its routes
// scenario (internal/bench/seed.go), in memory: n routes of one target
// each over min(n, 10,000) providers of one org and project.
func catalogState(n int) *store.State {
	now := time.Now()
	st := &store.State{Orgs: []store.Org{{ID: 1, Name: "default"}}, Projects: []store.Project{{ID: 1, OrgID: 1, Name: "default"}}}
	for i := range min(n, 10_000) {
		st.Providers = append(st.Providers, store.Provider{ID: int64(i + 1), OrgID: 1, Slug: fmt.Sprintf("filler-%05d", i), Name: "filler",
			Kind: store.KindVLLM, BaseURL: "http://127.0.0.1:9/v1", MetadataSource: store.MetadataConfigured, CreatedAt: now,
			Keys: []store.ProviderKey{{ID: int64(i + 1), ProviderID: int64(i + 1), Secret: secret.New(fmt.Sprintf("sk-filler-%05d", i)), Weight: 1}}})
	}
	for i := range n {
		st.Routes = append(st.Routes, store.Route{ID: int64(i + 1), ProjectID: 1, Model: fmt.Sprintf("filler-model-%06d", i), Strategy: "weighted",
			CreatedAt: now, Targets: []store.Target{{ProviderID: int64(i%len(st.Providers) + 1), UpstreamModel: "m", Weight: 1}}})
	}
	return st
}

// BenchmarkTable derives the gateway's whole table from a snapshot of
// 10,000 and 100,000 routes, as start-up does (issue 21): B/op and
// allocs/op are the derivation's; retained-B/route is the heap the table
// keeps beside the snapshot, per route. "plans" then builds every route's
// plan, as if each route had been asked for once: what a table costs
// when every route serves.
//
//	go test ./internal/gateway -run '^$' -bench Table -benchmem -memprofile mem.out
func BenchmarkTable(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		s := snapshot.Build(catalogState(n), time.Now())
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			g := New(Config{}, snapshot.NewHolder(nil, slog.New(slog.NewTextHandler(io.Discard, nil))), Options{})
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			t := g.buildTable(s, nil)
			runtime.GC()
			runtime.ReadMemStats(&ms1)
			retained := float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc)) / float64(n)
			runtime.KeepAlive(t)
			b.ReportAllocs()
			for b.Loop() {
				t = g.buildTable(s, nil)
			}
			runtime.KeepAlive(t)
			b.ReportMetric(retained, "retained-B/route")
		})
	}
}

// BenchmarkTablePlans is BenchmarkTable with every route's plan built
// once after the derivation, as if each route had been asked for: the
// table's cost when the whole catalog serves.
func BenchmarkTablePlans(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		s := snapshot.Build(catalogState(n), time.Now())
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			g := New(Config{}, snapshot.NewHolder(nil, slog.New(slog.NewTextHandler(io.Discard, nil))), Options{})
			build := func() *table {
				t := g.buildTable(s, nil)
				for range allPlans(t) {
				}
				return t
			}
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			t := build()
			runtime.GC()
			runtime.ReadMemStats(&ms1)
			retained := float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc)) / float64(n)
			runtime.KeepAlive(t)
			b.ReportAllocs()
			for b.Loop() {
				t = build()
			}
			runtime.KeepAlive(t)
			b.ReportMetric(retained, "retained-B/route")
		})
	}
}

// BenchmarkTableWrite is the gateway's part of one admin write at 10,000
// routes over 10,000 providers (the routes scenario's catalog): the
// table of the snapshot the write patched, derived from the table before
// it. "create" adds a route whose target puts a new model in its
// provider's catalog; "delete" removes it again; "patch" changes a
// route's policy only. The store write and the snapshot patch are
// outside the loop (BenchmarkRebuild times the whole write).
func BenchmarkTableWrite(b *testing.B) {
	e := newBenchEnv(b, 10_000)
	ctx := context.Background()
	proj, err := e.db.GetProject(ctx, e.snap.Current().Org("default").ID, "default")
	benchCheck(b, err)
	filler := e.snap.Current().Org("default").Providers.At("filler-00042")
	// write applies fn to the store and returns the table before it and
	// the snapshot after, patched from that table's.
	write := func(fn func() error) (*table, *snapshot.Snapshot) {
		before := e.gw.table.Load()
		benchCheck(b, fn())
		benchCheck(b, e.snap.Reload(ctx))
		s := e.snap.Current()
		if s.DiffFrom(before.snap) == nil {
			b.Fatal("the write was not patched")
		}
		return before, s
	}
	r := &store.Route{ProjectID: proj.ID, Model: "new-route", Strategy: "weighted",
		Targets: []store.Target{{ProviderID: filler.ID, UpstreamModel: "new-model", Weight: 1}}}
	// Each write's diff lasts until the next reload, so each is timed
	// before the next is made.
	for _, c := range []struct {
		name  string
		write func() error
	}{
		{"create", func() error { return e.db.CreateRoute(ctx, r) }},
		{"patch", func() error { r.Policy.MaxOutputTokens++; return e.db.UpdateRoute(ctx, r) }},
		{"delete", func() error { return e.db.DeleteRoute(ctx, r.ID) }},
	} {
		prev, s := write(c.write)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.gw.buildTable(s, prev)
			}
		})
	}
}
