package server

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// The readiness cache is given the provider list only when a write changed
// what it probes, and the list it holds after every write is the whole
// list of the snapshot serving (probeTargets), as a sync after every write
// would leave it.
func TestProbeSyncSkipsWritesProbesDoNotSee(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		db := storetest.Open(t, dialect, nil)
		ctx := context.Background()
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		org := &store.Org{Name: "o"}
		must(db.CreateOrg(ctx, org))
		pj := &store.Project{OrgID: org.ID, Name: "p"}
		must(db.CreateProject(ctx, pj))
		newProvider := func(slug string) *store.Provider {
			p := &store.Provider{OrgID: org.ID, Slug: slug, Name: slug, Kind: store.KindVLLM, BaseURL: "http://10.0.0.1/v1",
				MetadataSource: store.MetadataConfigured, Keys: []store.ProviderKey{{Secret: secret.New("sk-" + slug), Weight: 1}}}
			must(db.CreateProvider(ctx, p))
			return p
		}
		a, b := newProvider("a"), newProvider("b")
		rt := &store.Route{ProjectID: pj.ID, Model: "m", Strategy: "weighted",
			Targets: []store.Target{{ProviderID: a.ID, UpstreamModel: "up", Weight: 1}}}
		must(db.CreateRoute(ctx, rt))

		h := snapshot.NewHolder(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
		must(h.Reload(ctx))
		var synced []readiness.Provider
		syncs := 0
		h.OnSwap(syncProbes(func(ps []readiness.Provider) { synced, syncs = ps, syncs+1 }))
		if syncs != 1 {
			t.Fatalf("registering the hook synced %d times, want 1", syncs)
		}
		byID := func(x, y readiness.Provider) int { return cmp.Compare(x.ID, y.ID) }
		for i, w := range []struct {
			name  string
			write func()
			sync  bool // the write changes what the cache probes
		}{
			{"route strategy", func() { rt.Strategy = "round_robin"; must(db.UpdateRoute(ctx, rt)) }, false},
			{"route retargeted", func() {
				rt.Targets = []store.Target{{ProviderID: b.ID, UpstreamModel: "up2", Weight: 2}}
				must(db.UpdateRoute(ctx, rt))
			}, false},
			{"second route", func() {
				must(db.CreateRoute(ctx, &store.Route{ProjectID: pj.ID, Model: "m2", Strategy: "weighted",
					Targets: []store.Target{{ProviderID: a.ID, UpstreamModel: "up", Weight: 1}}}))
			}, false},
			{"provider name and models", func() { a.Name, a.Models = "renamed", []string{"x"}; must(db.UpdateProvider(ctx, a)) }, false},
			{"provider base URL", func() { a.BaseURL = "http://10.0.0.2/v1"; must(db.UpdateProvider(ctx, a)) }, true},
			{"provider slug", func() { a.Slug = "a2"; must(db.UpdateProvider(ctx, a)) }, true},
			{"provider metadata source", func() { b.MetadataSource = store.MetadataUpstream; must(db.UpdateProvider(ctx, b)) }, true},
			{"second pool key", func() {
				must(db.AddProviderKey(ctx, &store.ProviderKey{ProviderID: a.ID, Secret: secret.New("sk-a-2"), Weight: 1}))
			}, false},
			{"first pool key removed", func() { must(db.DeleteProviderKey(ctx, a.ID, a.Keys[0].ID)) }, true},
			{"provider created", func() { newProvider("c") }, true},
			{"provider deleted", func() { must(db.SoftDeleteProvider(ctx, b.ID, time.Now())) }, true},
			{"org renamed", func() { org.Name = "o2"; must(db.UpdateOrg(ctx, org)) }, true},
			{"route deleted", func() { must(db.DeleteRoute(ctx, rt.ID)) }, false},
		} {
			before, prev := syncs, h.Current()
			w.write()
			must(h.Reload(ctx))
			// A snapshot built whole (not patched) always syncs. On
			// PostgreSQL a reload may re-read rows written before its last
			// one (those at or above that read's xmin), so a write after
			// an org's may still build whole; on SQLite it is patched.
			patched := h.Current().DiffFrom(prev) != nil
			if !patched && !w.sync && dialect == "sqlite" {
				t.Fatalf("write %d (%s): the snapshot was built whole, not patched", i, w.name)
			}
			if got, want := syncs > before, w.sync || !patched; got != want {
				t.Errorf("write %d (%s): synced %v, want %v", i, w.name, got, want)
			}
			want := probeTargets(h.Current())
			got := slices.Clone(synced)
			slices.SortFunc(want, byID)
			slices.SortFunc(got, byID)
			if !slices.Equal(got, want) {
				t.Fatalf("write %d (%s): the cache has\n%s\nwant\n%s", i, w.name, describe(got), describe(want))
			}
		}
	})
}

// describe lists probe targets without their credentials' values.
func describe(ps []readiness.Provider) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("  %d %s/%s %s %s upstream=%v credential=%x\n", p.ID, p.Org, p.Slug, p.Kind, p.BaseURL, p.Upstream,
			secret.HashOf(p.Credential.Reveal()))
	}
	return s
}
