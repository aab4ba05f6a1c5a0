package gateway

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// allPlans are t's route plans, each built if no request has built it
// yet (lazyplan.go).
func allPlans(t *table) iter.Seq2[*snapshot.Route, *routePlan] {
	return func(yield func(*snapshot.Route, *routePlan) bool) {
		for r := range t.routes.All() {
			if !yield(r, t.routePlan(r)) {
				return
			}
		}
	}
}

// tableDump is what a request can see of t, canonical: plans by route
// id, providers, /v1/models entries and the routed deployments. It builds
// every plan no request has built yet, so a table dumped before a patch
// holds plans the patch must not keep where it derives anew.
func tableDump(t *table) string {
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	for r, p := range allPlans(t) {
		var tgs []string
		for i, tg := range p.targets {
			tgs = append(tgs, fmt.Sprintf("%v/%s w%d ctx%d %v prov(%s %s %v %v)", tg.id, tg.provider.slug, p.weights[i], tg.ctxLimit, tg.prices,
				tg.provider.base, tg.provider.kind, tg.provider.policy, tg.provider.draining))
		}
		add("route %d %s %s %+v %v facts %+v ready %d pool %d reason %q limiter %v", r.ID, p.route, p.strategy, p.policy, tgs, p.facts.down, p.facts.ready,
			p.facts.pool, p.facts.reason, p.limiter != nil)
		for _, tg := range p.targets {
			if v, ok := t.g.states.Load(tg.id); !ok || v.(*deployState) != tg.deployState {
				lines = append(lines, fmt.Sprintf("route %d: target %v has not the gateway's state", r.ID, tg.id))
			}
		}
		var fbs []string
		for _, fb := range t.fallbacks(p) {
			fbs = append(fbs, fb.route)
			if fb.src == nil || t.routePlan(t.snap.Route(fb.src.ID)) != fb {
				lines = append(lines, fmt.Sprintf("route %d: fallback %s is not the table's plan", r.ID, fb.route))
			}
		}
		if fb := t.ctxFallback(p); fb != nil {
			fbs = append(fbs, "ctx:"+fb.route)
			if fb.src == nil || t.routePlan(t.snap.Route(fb.src.ID)) != fb {
				lines = append(lines, fmt.Sprintf("route %d: context fallback %s is not the table's plan", r.ID, fb.route))
			}
		}
		add("route %d fallbacks %v", r.ID, fbs)
		if t.snap.Route(r.ID) != r {
			lines = append(lines, fmt.Sprintf("route %d: not the snapshot's", r.ID))
		}
	}
	for r := range t.routes.All() {
		if e, ok := t.routeModel(r); ok {
			add("route model %d %+v", r.ID, e)
		}
	}
	for id, p := range t.providers.All() {
		var keys []string
		for _, k := range p.keys {
			keys = append(keys, fmt.Sprintf("%d:%d", k.id, k.weight))
			if t.keys.At(k.id) != k {
				lines = append(lines, fmt.Sprintf("key %d not in the table's keys", k.id))
			}
		}
		add("provider %d %s %s %s %+v %v", id, p.slug, p.base, p.org, p.policy, keys)
	}
	add("keys %d", t.keys.Len())
	for o, ms := range t.models.All() {
		if t.snap.Org(o.Name) != o {
			lines = append(lines, "models of a stale org "+o.Name)
		}
		var entries []string
		for _, m := range ms {
			entries = append(entries, fmt.Sprintf("%+v", *m))
		}
		add("models %s %v", o.Name, entries)
	}
	for gr, g := range t.groups.All() {
		add("group %d %s %s", gr.ID, gr.Slug, g.strategy)
	}
	for id, n := range t.routed.All() {
		add("routed %v %d", id, n)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestTablePatchEqualsRebuild writes at random (providers, keys, routes,
// groups, fleet policy inheritance) and after each batch compares the
// gateway's table, patched from the snapshot's diff, with one derived from
// the whole snapshot; breakers of untouched routes are the same objects.
func TestTablePatchEqualsRebuild(t *testing.T) {
	writes := 1500
	if testing.Short() {
		writes = 200
	}
	onEveryStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		//nolint:gosec // G404: a reproducible sequence of test writes
		rng := rand.New(rand.NewPCG(21, 4))
		// Fallback names come from their own sequence, so adding them
		// left the writes above as they were.
		//nolint:gosec // G404: a reproducible sequence of test writes
		fbRng := rand.New(rand.NewPCG(19, 1))
		// Renames too (a provider's /v1/models entries move with its
		// slug).
		//nolint:gosec // G404: as rng
		renameRng := rand.New(rand.NewPCG(19, 2))
		var provs []*store.Provider
		var routes []*store.Route
		var groups []*store.Group
		n := 0
		live := func() []*store.Provider {
			return slices.DeleteFunc(slices.Clone(provs), func(p *store.Provider) bool { return p.DeletedAt != nil })
		}
		targets := func() []store.Target {
			ps := live()
			var out []store.Target
			for range 1 + rng.IntN(3) {
				p := ps[rng.IntN(len(ps))]
				if !slices.ContainsFunc(out, func(t store.Target) bool { return t.ProviderID == p.ID }) {
					out = append(out, store.Target{ProviderID: p.ID, UpstreamModel: fmt.Sprintf("up-%d", rng.IntN(4)), Weight: rng.IntN(3)})
				}
			}
			return out
		}
		// fallbacks names up to two routes, maybe gone, maybe r itself
		// (the admin API refuses that; the table must stay bounded), and
		// maybe a context fallback.
		fallbacks := func(r *store.Route) {
			r.Fallbacks, r.ContextFallback = nil, ""
			name := func() string {
				if len(routes) == 0 || fbRng.IntN(5) == 0 {
					return fmt.Sprintf("m-%d", fbRng.IntN(n+1))
				}
				return routes[fbRng.IntN(len(routes))].Model
			}
			for range fbRng.IntN(3) {
				if m := name(); !slices.Contains(r.Fallbacks, m) {
					r.Fallbacks = append(r.Fallbacks, m)
				}
			}
			if fbRng.IntN(3) == 0 {
				r.ContextFallback = name()
			}
		}
		write := func() {
			n++
			ps := live()
			switch op := rng.IntN(10); {
			case op == 0 || len(ps) < 3:
				p := &store.Provider{OrgID: h.org.ID, Slug: fmt.Sprintf("p-%d", n), Name: "p", Kind: []string{"vllm", "anthropic"}[rng.IntN(2)],
					BaseURL: "http://10.0.0.1/v1", MetadataSource: "configured", Keys: []store.ProviderKey{{Secret: secret.New(fmt.Sprintf("k%d", n)), Weight: 1}}}
				if len(routes) > 0 && rng.IntN(3) == 0 { // a fleet host's provider: its route's policy too
					p.Settings.PolicyRoute = routes[0].ID
				}
				must(t, h.db.CreateProvider(ctx, p))
				provs = append(provs, p)
			case op == 1:
				p := ps[rng.IntN(len(ps))]
				p.BaseURL = fmt.Sprintf("http://10.0.0.%d/v1", rng.IntN(100))
				p.Settings.Policy.MaxOutputTokens = rng.IntN(100)
				if renameRng.IntN(3) == 0 {
					p.Slug = fmt.Sprintf("p-%d", n)
				}
				must(t, h.db.UpdateProvider(ctx, p))
			case op == 2 && len(ps) > 3:
				p := ps[rng.IntN(len(ps))]
				at := time.Now()
				must(t, h.db.SoftDeleteProvider(ctx, p.ID, at))
				p.DeletedAt = &at
			case op == 3:
				must(t, h.db.AddProviderKey(ctx, &store.ProviderKey{ProviderID: ps[rng.IntN(len(ps))].ID, Secret: secret.New(fmt.Sprintf("a%d", n)), Weight: 2}))
			case op <= 5 || len(routes) == 0:
				r := &store.Route{ProjectID: h.proj.ID, Model: fmt.Sprintf("m-%d", n), Strategy: "weighted", Targets: targets()}
				fallbacks(r)
				must(t, h.db.CreateRoute(ctx, r))
				routes = append(routes, r)
			case op == 6:
				r := routes[rng.IntN(len(routes))]
				if rng.IntN(2) == 0 {
					r = routes[0] // the one fleet providers inherit from
				}
				r.Targets, r.Policy.MaxOutputTokens = targets(), 1+rng.IntN(1000)
				fallbacks(r)
				must(t, h.db.UpdateRoute(ctx, r))
			case op == 7:
				i := rng.IntN(len(routes))
				must(t, h.db.DeleteRoute(ctx, routes[i].ID))
				routes = slices.Delete(routes, i, i+1)
			default:
				if len(groups) > 0 && rng.IntN(2) == 0 {
					g := groups[rng.IntN(len(groups))]
					g.Members = []store.GroupMember{{ProviderID: ps[rng.IntN(len(ps))].ID, Weight: 1}}
					g.Policy.MaxConcurrency = rng.IntN(3)
					must(t, h.db.UpdateGroup(ctx, g))
					return
				}
				g := &store.Group{OrgID: h.org.ID, Slug: fmt.Sprintf("g-%d", n), Name: "g", Strategy: "weighted",
					Members: []store.GroupMember{{ProviderID: ps[rng.IntN(len(ps))].ID, Weight: 1}}}
				must(t, h.db.CreateGroup(ctx, g))
				groups = append(groups, g)
			}
		}
		patched := 0
		for done := 0; done < writes; {
			before := h.gw.table.Load()
			batch := 1 + rng.IntN(8)
			for range batch {
				write()
			}
			done += batch
			h.reload()
			got := h.gw.table.Load()
			if got.snap.DiffFrom(before.snap) != nil {
				patched++
			}
			want := h.gw.buildTable(got.snap, nil)
			if a, b := tableDump(got), tableDump(want); a != b {
				t.Fatalf("after %d writes the patched table differs from a rebuild:\npatched:\n%s\nrebuilt:\n%s", done, a, b)
			}
			// Runtime state of routes the batch did not reach persists:
			// their slots, with the plans built in before (tableDump).
			for r, p := range before.routes.All() {
				if q := got.routes.At(r); q != nil && q != p {
					continue // re-derived: its provider changed
				} else if q != nil && q.plan.Load() != p.plan.Load() {
					t.Fatalf("route %d: untouched plan lost its state", r.ID)
				}
			}
		}
		if patched == 0 {
			t.Error("no batch was patched")
		}
	})
}

// flipReadiness is a readiness source whose statuses a test sets.
type flipReadiness struct {
	mu sync.Mutex
	st map[int64]readiness.Status
}

func (f *flipReadiness) Status(id int64) (readiness.Status, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.st[id]
	return st, ok
}

func (f *flipReadiness) set(id int64, st readiness.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st[id] = st
}

// TestRefreshEqualsRebuild flips the readiness of providers at random
// (ready or not, discovered model and context, stale models), now and
// then with an admin write between, and after each Refresh compares the
// gateway's table, patched for the providers that changed, with one
// derived from the whole snapshot; plans over providers that did not
// change are the same objects.
func TestRefreshEqualsRebuild(t *testing.T) {
	rounds := 600
	if testing.Short() {
		rounds = 150
	}
	h := newHarness(t, Config{})
	ctx := context.Background()
	//nolint:gosec // G404: a reproducible sequence of test writes
	rng := rand.New(rand.NewPCG(21, 7))
	// Enough providers and routes that the table's maps are sharded.
	var provs []*store.Provider
	for i := range 60 {
		p := &store.Provider{OrgID: h.org.ID, Slug: fmt.Sprintf("p-%d", i), Name: "p", Kind: "vllm", BaseURL: "http://10.0.0.1/v1",
			MetadataSource: []string{"configured", "upstream"}[i%2], Keys: []store.ProviderKey{{Secret: secret.New(fmt.Sprintf("k%d", i)), Weight: 1}}}
		if i%3 == 0 {
			p.Models = []string{"up-0", "up-1"}
		}
		must(t, h.db.CreateProvider(ctx, p))
		provs = append(provs, p)
	}
	targets := func() []store.Target {
		var out []store.Target
		for range 1 + rng.IntN(3) {
			p := provs[rng.IntN(len(provs))]
			if !slices.ContainsFunc(out, func(t store.Target) bool { return t.ProviderID == p.ID }) {
				out = append(out, store.Target{ProviderID: p.ID, UpstreamModel: fmt.Sprintf("up-%d", rng.IntN(3)), Weight: rng.IntN(3),
					ContextLimit: rng.IntN(2) * 4096})
			}
		}
		return out
	}
	var routes []*store.Route
	for i := range 120 {
		r := &store.Route{ProjectID: h.proj.ID, Model: fmt.Sprintf("m-%d", i), Strategy: "weighted", Targets: targets()}
		must(t, h.db.CreateRoute(ctx, r))
		routes = append(routes, r)
	}
	for i := range 4 {
		g := &store.Group{OrgID: h.org.ID, Slug: fmt.Sprintf("g-%d", i), Name: "g", Strategy: "weighted",
			Members: []store.GroupMember{{ProviderID: provs[i].ID, Weight: 1}, {ProviderID: provs[10+rng.IntN(50)].ID, Weight: 1}}}
		must(t, h.db.CreateGroup(ctx, g))
	}
	h.reload()
	ready := &flipReadiness{st: map[int64]readiness.Status{}}
	h.gw.ready = ready
	h.gw.Refresh()
	flip := func() int64 {
		p := provs[rng.IntN(len(provs))]
		var st readiness.Status
		switch rng.IntN(4) {
		case 0:
			st = readiness.Status{Reason: "probe failed", Class: readiness.ClassHealthFailed, LastError: fmt.Sprint(rng.Int())}
		case 1:
			st = readiness.Status{Ready: true, Facts: readiness.Facts{ModelID: fmt.Sprintf("up-%d", rng.IntN(3)), Context: 1024 * (1 + rng.IntN(3))}}
		case 2:
			st = readiness.Status{Ready: true, Facts: readiness.Facts{ModelID: "up-0", Context: 8192},
				Stale: map[string]string{fmt.Sprintf("up-%d", rng.IntN(3)): "not listed"}}
		default: // only what a table does not read changes
			st, _ = ready.Status(p.ID)
			st.LastProbe, st.LastError = time.Unix(rng.Int64N(1e9), 0), fmt.Sprint(rng.Int())
		}
		ready.set(p.ID, st)
		return p.ID
	}
	refreshed := 0
	for round := range rounds {
		before := h.gw.table.Load()
		flipped := map[int64]bool{}
		for range 1 + rng.IntN(3) {
			flipped[flip()] = true
		}
		if rng.IntN(5) == 0 { // an admin write between: the patch and the refresh share the view
			r := routes[rng.IntN(len(routes))]
			r.Targets = targets()
			must(t, h.db.UpdateRoute(ctx, r))
			h.reload()
			before = nil
		}
		h.gw.Refresh()
		got := h.gw.table.Load()
		if got != before {
			refreshed++
		}
		want := h.gw.buildTable(got.snap, nil)
		if a, b := tableDump(got), tableDump(want); a != b {
			t.Fatalf("round %d: the refreshed table differs from a rebuild:\nrefreshed:\n%s\nrebuilt:\n%s", round, a, b)
		}
		if before == nil {
			continue
		}
		for r, p := range before.routes.All() {
			over := slices.ContainsFunc(r.Targets, func(tg snapshot.Target) bool { return flipped[tg.Provider.ID] })
			if q := got.routes.At(r); !over && (q != p || q.plan.Load() != p.plan.Load()) {
				t.Fatalf("round %d: route %d over no flipped provider was derived anew", round, r.ID)
			}
		}
	}
	if refreshed == 0 {
		t.Error("no refresh changed the table")
	}
}
