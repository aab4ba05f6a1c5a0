package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// dump is the routing content of s, canonical: one sorted line per
// entity, with the ids its pointers lead to, so that two snapshots built
// differently compare equal exactly when a request would see the same.
// It also checks that every pointer leads into s itself.
func dump(t *testing.T, s *Snapshot) string {
	t.Helper()
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	for name, o := range s.orgs.All() {
		add("org %s %+v", name, o.Org)
		for slug, p := range o.Providers.All() {
			keys := make([]string, len(p.Keys))
			for i, k := range p.Keys {
				keys[i] = fmt.Sprintf("%d:%d:%s:%s", k.ID, k.Weight, k.Ref, k.Secret.Reveal())
			}
			q := p.Provider
			q.Keys = nil
			add("provider %s/%s %+v keys %v catalog %v", name, slug, q, keys, p.Catalog)
		}
		for slug, g := range o.Groups.All() {
			for _, m := range g.Members {
				if o.Providers.At(m.Provider.Slug) != m.Provider {
					t.Errorf("group %s/%s: member %d is not the snapshot's provider", name, slug, m.ProviderID)
				}
			}
			add("group %s/%s %+v", name, slug, g.Group)
		}
		for pname, pj := range o.Projects.All() {
			if pj.Org != o {
				t.Errorf("project %s/%s: not its org's", name, pname)
			}
			add("project %s/%s %+v", name, pname, pj.Project)
			for model, r := range pj.Routes.All() {
				var targets []string
				for _, tg := range r.Targets {
					if o.Providers.At(tg.Provider.Slug) != tg.Provider {
						t.Errorf("route %s: target %d is not the snapshot's provider", model, tg.ProviderID)
					}
					targets = append(targets, fmt.Sprint(tg.ProviderID)) // the row (Row) has the rest
				}
				q := r.Row()
				add("route %s/%s/%s %+v targets %v", name, pname, model, q, targets)
			}
		}
	}
	for lookup, k := range s.keys.All() {
		if k.Project.Org.Projects.At(k.Project.Name) != k.Project {
			t.Errorf("key %d: not its project's", k.ID)
		}
		add("key %s %+v project %d", lookup, k.VirtualKey, k.Project.ID)
	}
	for _, a := range s.adminTokens {
		add("admin token %+v %v", a.scope, a.expiresAt)
	}
	for r, ps := range s.ix.heirs.All() {
		add("heirs of route %d %v", r, slices.Sorted(slices.Values(ps)))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestIncrementalEqualsRebuild applies random writes (10,000, or 300 with
// -short) in batches, and after each batch compares the snapshot a Holder
// patched from the change journal with one built from a full read.
func TestIncrementalEqualsRebuild(t *testing.T) {
	changes := 10_000
	if testing.Short() {
		changes = 300
	}
	storetest.Each(t, func(t *testing.T, dialect string) {
		db := storetest.Open(t, dialect, nil)
		ctx := context.Background()
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		//nolint:gosec // G404: a reproducible sequence of test writes, no secrets
		rng := rand.New(rand.NewPCG(21, uint64(len(db.Dialect()))))
		//nolint:gosec // G404: as rng
		heirRng := rand.New(rand.NewPCG(23, 1))
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		org := &store.Org{Name: "o"}
		must(db.CreateOrg(ctx, org))
		var projects []*store.Project
		for i := range 2 {
			p := &store.Project{OrgID: org.ID, Name: fmt.Sprintf("p%d", i)}
			must(db.CreateProject(ctx, p))
			projects = append(projects, p)
		}
		h := NewHolder(db, log)
		must(h.Reload(ctx))
		var (
			providers []*store.Provider
			routes    []*store.Route
			groups    []*store.Group
			keys      []*store.VirtualKey
			n         int
		)
		live := func() []*store.Provider {
			return slices.DeleteFunc(slices.Clone(providers), func(p *store.Provider) bool { return p.DeletedAt != nil })
		}
		pick := func(ps []*store.Provider) *store.Provider { return ps[rng.IntN(len(ps))] }
		targets := func() []store.Target {
			ps := live()
			var out []store.Target
			for range 1 + rng.IntN(3) {
				p := pick(ps)
				if slices.ContainsFunc(out, func(t store.Target) bool { return t.ProviderID == p.ID }) {
					continue
				}
				out = append(out, store.Target{ProviderID: p.ID, UpstreamModel: fmt.Sprintf("up-%d", rng.IntN(5)), Weight: 1 + rng.IntN(3)})
			}
			return out
		}
		write := func() {
			n++
			ps := live()
			switch op := rng.IntN(12); {
			case op == 0 || len(ps) < 3:
				p := &store.Provider{OrgID: org.ID, Slug: fmt.Sprintf("prov-%d", n), Name: "p", Kind: "vllm", BaseURL: "http://10.0.0.1/v1",
					MetadataSource: "configured", Models: []string{fmt.Sprintf("m-%d", rng.IntN(4))},
					Keys: []store.ProviderKey{{Secret: secret.New(fmt.Sprintf("sk-%d", n)), Weight: 1}}}
				must(db.CreateProvider(ctx, p))
				providers = append(providers, p)
			case op == 1:
				p := pick(ps)
				p.BaseURL = fmt.Sprintf("http://10.0.0.%d/v1", rng.IntN(200))
				p.Models = append(p.Models[:0:0], fmt.Sprintf("m-%d", rng.IntN(4)))
				if rng.IntN(3) == 0 {
					p.Slug = fmt.Sprintf("renamed-%d", n) // its routes' targets carry the new slug
				}
				// A fleet host's provider inherits a route's policy (maybe
				// of a route gone since): its own sequence, so that the
				// writes above stay as they were.
				if len(routes) > 0 && heirRng.IntN(2) == 0 {
					p.Settings.PolicyRoute = routes[heirRng.IntN(len(routes))].ID
				} else if heirRng.IntN(3) == 0 {
					p.Settings.PolicyRoute = 0
				}
				must(db.UpdateProvider(ctx, p))
			case op == 2 && len(ps) > 3:
				p := pick(ps)
				at := time.Now()
				must(db.SoftDeleteProvider(ctx, p.ID, at))
				p.DeletedAt = &at
			case op == 3:
				p := pick(ps)
				k := &store.ProviderKey{ProviderID: p.ID, Secret: secret.New(fmt.Sprintf("sk-add-%d", n)), Weight: 2}
				must(db.AddProviderKey(ctx, k))
			case op <= 6 || len(routes) == 0:
				r := &store.Route{ProjectID: projects[rng.IntN(2)].ID, Model: fmt.Sprintf("model-%d", n), Strategy: "weighted", Targets: targets()}
				must(db.CreateRoute(ctx, r))
				routes = append(routes, r)
			case op == 7:
				r := routes[rng.IntN(len(routes))]
				r.Targets, r.Strategy = targets(), []string{"weighted", "least-busy"}[rng.IntN(2)]
				r.Policy.MaxOutputTokens = rng.IntN(1000)
				must(db.UpdateRoute(ctx, r))
			case op == 8:
				i := rng.IntN(len(routes))
				must(db.DeleteRoute(ctx, routes[i].ID))
				routes = slices.Delete(routes, i, i+1)
			case op == 9:
				if len(groups) > 0 && rng.IntN(2) == 0 {
					g := groups[rng.IntN(len(groups))]
					g.Members = []store.GroupMember{{ProviderID: pick(ps).ID, Weight: 1}}
					must(db.UpdateGroup(ctx, g))
					return
				}
				g := &store.Group{OrgID: org.ID, Slug: fmt.Sprintf("group-%d", n), Name: "g", Strategy: "weighted",
					Members: []store.GroupMember{{ProviderID: pick(ps).ID, Weight: 1, ModelMap: map[string]string{"a": "b"}}}}
				must(db.CreateGroup(ctx, g))
				groups = append(groups, g)
			case op == 10:
				tok, lookup := secret.Mint(secret.PrefixVirtualKey)
				k := &store.VirtualKey{ProjectID: projects[rng.IntN(2)].ID, Name: fmt.Sprintf("k-%d", n), Lookup: lookup, Hash: secret.HashOf(tok.Reveal())}
				must(db.CreateVirtualKey(ctx, k))
				keys = append(keys, k)
			default:
				if len(keys) > 0 {
					must(db.RevokeVirtualKey(ctx, keys[rng.IntN(len(keys))].ID, time.Now()))
				} else {
					pj := projects[rng.IntN(2)]
					pj.Description = fmt.Sprintf("d%d", n)
					must(db.UpdateProject(ctx, pj))
				}
			}
		}
		full0 := h.FullLoads()
		batches := 0
		for done := 0; done < changes; {
			batches++
			batch := 1 + rng.IntN(40)
			for range batch {
				write()
			}
			done += batch
			must(h.Reload(ctx))
			st, err := db.Load(ctx)
			must(err)
			want, got := dump(t, Build(st, time.Now())), dump(t, h.Current())
			if got != want {
				t.Fatalf("after %d writes the patched snapshot differs from a rebuild:\npatched:\n%s\nrebuilt:\n%s", done, got, want)
			}
		}
		if f := h.FullLoads() - full0; f != 0 {
			t.Errorf("%d full reads during the batches, want 0 (each reads what changed)", f)
		}
		// Batches that wrote a project are built anew; most are patched.
		if p := h.patches.Load(); p < uint64(batches)/2 {
			t.Errorf("%d of %d batches patched, want most", p, batches)
		}
		t.Logf("%d writes in %d batches, %d patched", changes, batches, h.patches.Load())
	})
}
