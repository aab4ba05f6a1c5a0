package gateway

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/balancer"
	"github.com/rolter/rolter/internal/cooldown"
	"github.com/rolter/rolter/internal/policy"
	"github.com/rolter/rolter/internal/resolve"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// table is the gateway's view of one snapshot: everything a request needs,
// resolved once per configuration change. Runtime state (breakers, in-flight
// counts, latency) lives in objects carried over from the previous table by
// identity, so a configuration change does not forget health.
type table struct {
	snap   *snapshot.Snapshot
	routes map[*snapshot.Route]*routePlan
	groups map[*snapshot.Group]groupRT
	// groupLimiters are the groups with max_concurrency.
	groupLimiters map[*snapshot.Group]*policy.Limiter
	providers     map[int64]*providerRT // by provider id
	keys          map[int64]*keyRT      // by provider key id
	// models are the /v1/models entries of each org's provider and group
	// addresses, sorted; routes are listed per project.
	models map[*snapshot.Org][]modelEntry
	// routeModels are the /v1/models entries of routes with a serving
	// target, with their pool context.
	routeModels map[*snapshot.Route]modelEntry
	// routed counts the route targets of each deployment: its state
	// never expires while a route targets it.
	routed map[targetID]int
}

// routePlan is an address ready to balance: a route's targets, a group's
// members, or one pinned provider.
type routePlan struct {
	kind  resolve.Kind
	route string // route model, for usage and the bounded "route" metric label; "" for provider and group addresses
	// strategy is the balancer strategy (package balancer); rr its round
	// robin position, kept per route or group for the table's life.
	strategy string
	rr       *atomic.Uint64
	targets  []*targetRT
	weights  []int // per target
	// pinned plans never fall back to panic mode: the caller asked for this
	// provider, so a cooling one fails clearly instead of being tried.
	pinned bool
	// policy is the address's own: the route's or the group's (a provider
	// address has none beside its provider's, which every target carries).
	policy  store.Policy
	limiter *policy.Limiter // routes and groups with max_concurrency only
	// src is the route a route plan was derived from, whose fallback
	// names are resolved per request in the table serving it
	// (fallback.go): a plan never points at another, so a patched table
	// neither keeps stale links nor writes to plans it shares. nil for
	// provider and group addresses and narrowed (pinned) plans.
	src *snapshot.Route
	// facts are what admission needs of the targets, computed with the
	// plan: when the table is built for a route, per request for the
	// plans of provider and group addresses (routable.go).
	facts *planFacts
	// live is the routable set: the facts' members that are not cooling,
	// rebuilt when a breaker changes (routable.go).
	live       atomic.Pointer[liveSet]
	rebuilding atomic.Bool
}

// groupRT is a group's balancing: its strategy and round robin position.
type groupRT struct {
	strategy string
	rr       *atomic.Uint64
}

// targetID is the identity of a deployment: a provider serving a model.
// Routes that send the same model to the same provider share its health.
type targetID struct {
	provider int64
	model    string
}

// targetRT is one deployment as a request sees it: its provider's current
// configuration and its lasting runtime state.
type targetRT struct {
	id       targetID
	provider *providerRT
	ctxLimit int // configured per-target context; 0: the provider's
	priority int // the target's tier in its route (issue 19); 0 elsewhere
	// configured: the model comes from configuration (a route target, a
	// provider's catalog or a group's model map, or discovery), not only
	// from the client, so an upstream "no such model" means the
	// configuration is stale rather than that the caller erred.
	configured bool

	prices *store.Prices // the target's own prices; nil: the provider's (spend.go)
	*deployState
}

// deployState is what the gateway remembers about a deployment across
// configuration changes.
type deployState struct {
	stats   *balancer.Stats
	breaker *cooldown.Breaker
	// used is when a request last named the deployment (clock nanoseconds,
	// coarse: refreshed at most once a second), so state nobody uses can
	// expire.
	used atomic.Int64
}

// Provider and group addresses let clients name models, and each named
// model is a deployment with its own state. The remembered deployments are
// bounded in count and in bytes. When the bound is reached, client-named
// deployments idle for stateBusyTTL are forgotten to make room; if that
// frees nothing, a new one gets fresh state per request (health is not
// remembered, memory does not grow). Route targets are always remembered:
// the configuration bounds them. Deployments no route targets and no
// request named for stateTTL are forgotten.
const (
	maxStates     = 50_000
	maxStateBytes = 16 << 20
	stateTTL      = 10 * time.Minute
	stateBusyTTL  = time.Minute
	// stateOverhead estimates one entry's bytes beside its model string:
	// the map entry, key, deployState, breaker and stats.
	stateOverhead = 384
)

func stateCost(id targetID) int64 { return stateOverhead + int64(len(id.model)) }

// state returns the lasting state of a deployment, creating it on first
// use. routed is set for route targets (table builds), which are always
// stored.
func (g *Gateway) state(id targetID, routed bool) *deployState {
	now := g.clock.Now().UnixNano()
	if v, ok := g.states.Load(id); ok {
		st := v.(*deployState)
		st.touch(now)
		return st
	}
	st := &deployState{stats: &balancer.Stats{}, breaker: cooldown.New(g.cfg.Cooldown, g.clock)}
	st.used.Store(now)
	cost := stateCost(id)
	full := func() bool { return g.nstates.Load() >= maxStates || g.stateBytes.Load()+cost > maxStateBytes }
	switch {
	case routed:
	case full():
		g.sweep(now, stateBusyTTL)
		if full() {
			return st
		}
	case now-g.lastSweep.Load() > int64(stateTTL/2):
		g.sweep(now, stateTTL)
	}
	v, loaded := g.states.LoadOrStore(id, st)
	if !loaded {
		g.nstates.Add(1)
		g.stateBytes.Add(cost)
	}
	return v.(*deployState)
}

func (st *deployState) touch(now int64) {
	// A store per request would make every caller of a hot deployment
	// write one shared cache line; once a second is plenty for expiry.
	if now-st.used.Load() > int64(time.Second) {
		st.used.Store(now)
	}
}

// sweep forgets deployments that no route of the current table targets and
// that nobody named for idle. It runs at most once a second (a full map
// under attack does not make every request scan it), and never while a
// table is being built: the routed set it spares must be the one in use.
func (g *Gateway) sweep(now int64, idle time.Duration) {
	if !g.mu.TryLock() { // a rebuild is running (maybe our own caller)
		return
	}
	defer g.mu.Unlock()
	if last := g.lastSweep.Load(); last != 0 && now-last < int64(time.Second) {
		return
	}
	g.lastSweep.Store(now)
	var routed map[targetID]int
	if t := g.table.Load(); t != nil {
		routed = t.routed
	}
	g.states.Range(func(k, v any) bool {
		id, st := k.(targetID), v.(*deployState)
		if routed[id] == 0 && now-st.used.Load() > int64(idle) && g.states.CompareAndDelete(id, st) {
			g.nstates.Add(-1)
			g.stateBytes.Add(-stateCost(id))
		}
		return true
	})
}

// providerRT is a provider with its endpoint facts and key pool.
type providerRT struct {
	id               int64
	org              string // the org's name, for metric labels
	slug             string
	kind             string
	pairs            *[numAPIs]pairing // per client API, by kind (pairingsFor)
	base             string            // base_url without trailing slash
	firstByteTimeout time.Duration
	idleTimeout      time.Duration
	keys             []*keyRT
	upstream         bool // metadata_source "upstream": model and context are discovered
	contextLimit     int  // configured context; 0: unknown
	// prices are what the provider's tokens cost; nil: unpriced (spend.go).
	prices *store.Prices
	// forward and forwardPrefixes are the operator's forward_headers:
	// canonical names, and the prefixes of entries ending in "*".
	forward, forwardPrefixes []string
	// policy is the provider's own policy, combined with its fleet route's
	// when it inherits one; limiter bounds its attempts in flight (nil:
	// unlimited), kept across rebuilds.
	policy  store.Policy
	limiter *policy.Limiter
	// draining is set while the provider's fleet host drains before a
	// restart: no new request goes to it. drain cuts the attempts in
	// flight at the deadline; nil for providers that are not fleet hosts.
	draining bool
	drain    *drainCut
	obs      provObs // its metric children (observe.go)
}

// keyRT is one pool key; auth is the precomputed header value.
type keyRT struct {
	id      int64
	weight  int
	auth    string // "Bearer <secret>", for OpenAI-compatible upstreams
	secret  string // for Anthropic's x-api-key
	breaker *cooldown.Breaker
}

// buildTable derives a table from s, reusing key state from prev. When s
// was patched from prev's snapshot (snapshot.Diff), only what the patch
// changed is derived anew (patchTable).
func (g *Gateway) buildTable(s *snapshot.Snapshot, prev *table) *table {
	if prev != nil && prev.snap != nil {
		if d := s.DiffFrom(prev.snap); d != nil {
			return g.patchTable(s, prev, d)
		}
	}
	t := &table{snap: s, routes: map[*snapshot.Route]*routePlan{}, groups: map[*snapshot.Group]groupRT{},
		groupLimiters: map[*snapshot.Group]*policy.Limiter{},
		providers:     map[int64]*providerRT{}, keys: map[int64]*keyRT{}, models: map[*snapshot.Org][]modelEntry{},
		routeModels: map[*snapshot.Route]modelEntry{}, routed: map[targetID]int{}}
	if prev == nil {
		prev = &table{keys: map[int64]*keyRT{}}
	}
	s.EachOrg(func(o *snapshot.Org) {
		for _, p := range o.Providers.All() {
			t.providers[p.ID] = g.providerOf(s, o, p, prev, t)
		}
		for _, gr := range o.Groups.All() {
			g.addGroup(t, gr)
		}
		t.models[o] = g.orgModels(t, o)
		for _, pj := range o.Projects.All() {
			for _, r := range pj.Routes.All() {
				g.addRoute(t, r)
			}
		}
	})
	return t
}

// patchTable derives the table of s from prev, the table of the snapshot
// s was patched from: the providers, groups and routes d lists are derived
// anew, and so are the plans of the routes that target a provider derived
// anew, and the /v1/models entries of the orgs whose providers or groups
// changed; everything else, plans and their runtime state included, is
// prev's (issue 21).
func (g *Gateway) patchTable(s *snapshot.Snapshot, prev *table, d *snapshot.Diff) *table {
	t := &table{snap: s, routes: maps.Clone(prev.routes), groups: maps.Clone(prev.groups), groupLimiters: maps.Clone(prev.groupLimiters),
		providers: maps.Clone(prev.providers), keys: prev.keys, models: maps.Clone(prev.models),
		routeModels: maps.Clone(prev.routeModels), routed: maps.Clone(prev.routed)}
	remodel := map[int64]bool{} // org ids whose /v1/models entries change
	replan := map[*snapshot.Route]bool{}
	if len(d.Providers) > 0 || len(d.Routes) > 0 { // providers may be derived anew
		t.keys = maps.Clone(prev.keys)
	}
	for _, id := range d.Providers {
		if old := prev.providers[id]; old != nil {
			for _, k := range old.keys {
				delete(t.keys, k.id)
			}
			delete(t.providers, id)
		}
		// The org it left lists it no more, whether it is gone or changed.
		if was := prev.snap.Provider(id); was != nil {
			remodel[was.OrgID] = true
		}
		p := s.Provider(id)
		if p == nil {
			continue
		}
		t.providers[id] = g.providerOf(s, s.OrgByID(p.OrgID), p, prev, t)
		remodel[p.OrgID] = true
		s.RoutesOf(id, func(r *snapshot.Route) { replan[r] = true })
	}
	// A fleet host's provider follows its route's policy: a route written
	// re-derives the providers that inherit from it, and their routes.
	inherits := map[int64]bool{}
	for _, c := range d.Routes {
		for _, r := range []*snapshot.Route{c.Old, c.New} {
			if r != nil {
				inherits[r.ID] = true
			}
		}
	}
	if len(inherits) > 0 {
		s.EachOrg(func(o *snapshot.Org) {
			for _, p := range o.Providers.All() {
				if inherits[p.Settings.PolicyRoute] && !slices.Contains(d.Providers, p.ID) {
					t.providers[p.ID] = g.providerOf(s, o, p, prev, t)
					remodel[p.OrgID] = true
					s.RoutesOf(p.ID, func(r *snapshot.Route) { replan[r] = true })
				}
			}
		})
	}
	for _, c := range d.Groups {
		if c.Old != nil {
			delete(t.groups, c.Old)
			delete(t.groupLimiters, c.Old)
			remodel[c.Old.OrgID] = true
		}
		if c.New != nil {
			g.addGroup(t, c.New)
			remodel[c.New.OrgID] = true
		}
	}
	for _, c := range d.Routes {
		if c.Old != nil {
			g.dropRoute(t, prev, c.Old)
		}
		if c.New != nil {
			replan[c.New] = true
		}
	}
	for r := range replan {
		if prev.routes[r] != nil {
			g.dropRoute(t, prev, r) // the same route, over a provider derived anew
		}
		g.addRoute(t, r)
	}
	for _, c := range d.Orgs {
		delete(t.models, c.Old)
		if remodel[c.New.ID] {
			t.models[c.New] = g.orgModels(t, c.New)
		} else {
			t.models[c.New] = prev.models[c.Old]
		}
	}
	return t
}

// providerOf derives provider p of org o: its runtime, with the policy it
// inherits from its fleet route, its limiter and its drain state.
func (g *Gateway) providerOf(s *snapshot.Snapshot, o *snapshot.Org, p *snapshot.Provider, prev, t *table) *providerRT {
	rt := g.providerRT(o.Name, p, prev, t)
	if p.Settings.PolicyRoute != 0 {
		if r := s.Route(p.Settings.PolicyRoute); r != nil {
			rt.policy = policy.Strictest(rt.policy, r.Policy)
		}
	}
	rt.limiter = g.keptLimiter(providerLimiter(p.ID), rt.policy.MaxConcurrency)
	rt.draining = p.Settings.DrainDeadline != nil
	rt.drain = g.drainCutFor(o.Name, p)
	return rt
}

// selector is strategy if the balancer knows it, else weighted.
func (g *Gateway) selector(strategy, what string) string {
	if _, err := balancer.New(strategy); err != nil { // the admin API validates strategies; stay up regardless
		g.log.Error("unknown strategy; using weighted", "for", what, "err", err)
		return balancer.Weighted
	}
	return strategy
}

// addGroup derives group gr's balancing and limiter into t.
func (g *Gateway) addGroup(t *table, gr *snapshot.Group) {
	t.groups[gr] = groupRT{strategy: g.selector(gr.Strategy, "group "+gr.Slug), rr: new(atomic.Uint64)}
	if l := g.keptLimiter(groupLimiter(gr.ID), gr.Policy.MaxConcurrency); l != nil {
		t.groupLimiters[gr] = l
	} else {
		delete(t.groupLimiters, gr)
	}
}

// orgModels are the /v1/models entries of o's provider and group
// addresses, sorted by id.
func (g *Gateway) orgModels(t *table, o *snapshot.Org) []modelEntry {
	var models []modelEntry
	for _, p := range o.Providers.All() {
		rt := t.providers[p.ID]
		st := g.status(rt)
		if !st.Ready {
			continue
		}
		catalog, ctx := p.Catalog, p.ContextLimit
		if rt.upstream { // the upstream's one model, as discovered
			catalog, ctx = []string{st.Facts.ModelID}, st.Facts.Context
		}
		for _, m := range catalog {
			if _, stale := st.Stale[m]; stale {
				continue
			}
			models = append(models, modelEntry{ID: p.Slug + "/" + m, Object: "model", Created: p.CreatedAt.Unix(),
				OwnedBy: p.Slug, AddressKind: string(resolve.KindProvider), ContextLength: ctx, Modalities: st.Facts.Modalities,
				Quantization: st.Facts.Quantization, Policy: rt.policy})
		}
	}
	for _, gr := range o.Groups.All() {
		union := map[string]int{}            // model -> pool context (minimum known)
		governs := map[string]store.Policy{} // model -> strictest policy over its members
		for _, m := range gr.Members {
			rt := t.providers[m.Provider.ID]
			st := g.status(rt)
			if !st.Ready {
				continue
			}
			catalog, ctx := m.Provider.Catalog, m.Provider.ContextLimit
			if rt.upstream {
				catalog, ctx = []string{st.Facts.ModelID}, st.Facts.Context
			}
			for client, up := range m.ModelMap {
				if slices.Contains(catalog, up) || len(m.Provider.Models) == 0 && !rt.upstream {
					catalog = append(catalog[:len(catalog):len(catalog)], client)
				}
			}
			for _, c := range catalog {
				if old, seen := union[c]; !seen || (ctx > 0 && (old == 0 || ctx < old)) {
					union[c] = ctx
				}
				governs[c] = policy.Strictest(governs[c], rt.policy)
			}
		}
		for m, ctx := range union {
			models = append(models, modelEntry{ID: gr.Slug + "/" + m, Object: "model", Created: gr.CreatedAt.Unix(),
				OwnedBy: gr.Slug, AddressKind: string(resolve.KindGroup), ContextLength: ctx,
				Policy: policy.Strictest(gr.Policy, governs[m])})
		}
	}
	slices.SortFunc(models, func(a, b modelEntry) int { return strings.Compare(a.ID, b.ID) })
	return models
}

// addRoute derives route r's plan and /v1/models entry into t.
func (g *Gateway) addRoute(t *table, r *snapshot.Route) {
	plan := &routePlan{kind: resolve.KindRoute, route: r.Model, src: r,
		strategy: g.selector(r.Strategy, "route "+r.Model), rr: new(atomic.Uint64), policy: r.Policy, limiter: g.limiter(r)}
	entry := modelEntry{ID: r.Model, Object: "model", Created: r.CreatedAt.Unix(), OwnedBy: "rolter",
		AddressKind: string(resolve.KindRoute), Policy: r.Policy}
	serving := false
	for _, tg := range r.Targets {
		target := g.target(t, tg.Provider.ID, tg.UpstreamModel, true)
		t.routed[target.id]++
		target.ctxLimit = tg.ContextLimit
		target.priority = tg.Priority
		target.configured = true
		target.prices = tg.Prices
		plan.targets = append(plan.targets, target)
		plan.weights = append(plan.weights, tg.Weight)
		if target.provider.draining && tg.Weight > 0 {
			serving = true // listed while it restarts: callers get 503 pool_draining, not 404
			continue
		}
		if st := g.status(target.provider); st.Ready && tg.Weight > 0 && g.unroutable(target, st, r.Model) == "" {
			serving = true
			entry.Policy = policy.Strictest(entry.Policy, target.provider.policy)
			if c := contextOf(target, st); c > 0 && (entry.ContextLength == 0 || c < entry.ContextLength) {
				entry.ContextLength = c
			}
		}
	}
	plan.facts = g.facts(plan, r.Model)
	t.routes[r] = plan
	if serving {
		t.routeModels[r] = entry
	} else {
		delete(t.routeModels, r)
	}
}

// dropRoute removes route r, as prev derived it, from t.
func (g *Gateway) dropRoute(t, prev *table, r *snapshot.Route) {
	if plan := prev.routes[r]; plan != nil {
		for _, tg := range plan.targets {
			if t.routed[tg.id]--; t.routed[tg.id] <= 0 {
				delete(t.routed, tg.id)
			}
		}
	}
	delete(t.routes, r)
	delete(t.routeModels, r)
}

func (g *Gateway) providerRT(org string, p *snapshot.Provider, prev, t *table) *providerRT {
	rt := &providerRT{id: p.ID, org: org, slug: p.Slug, kind: p.Kind, pairs: pairingsFor(p.Kind), base: strings.TrimRight(p.BaseURL, "/"),
		firstByteTimeout: g.cfg.FirstByteTimeout, idleTimeout: g.cfg.IdleTimeout,
		upstream: p.MetadataSource == store.MetadataUpstream, contextLimit: p.ContextLimit, policy: p.Settings.Policy, prices: p.Settings.Prices}
	if d := time.Duration(p.Settings.FirstByteTimeout); d > 0 {
		rt.firstByteTimeout = d
	}
	if d := time.Duration(p.Settings.IdleTimeout); d > 0 {
		rt.idleTimeout = d
	}
	for _, h := range p.Settings.ForwardHeaders {
		if pre, ok := strings.CutSuffix(h, "*"); ok {
			rt.forwardPrefixes = append(rt.forwardPrefixes, pre)
		} else {
			rt.forward = append(rt.forward, http.CanonicalHeaderKey(h))
		}
	}
	for _, k := range p.Keys {
		kr := &keyRT{id: k.ID, weight: k.Weight, auth: "Bearer " + k.Secret.Reveal(), secret: k.Secret.Reveal()}
		// A key keeps its breaker across rebuilds until its secret is
		// edited: a new secret starts clean (a refused one may work now).
		if old := prev.keys[k.ID]; old != nil && old.secret == kr.secret {
			kr.breaker = old.breaker
		} else {
			kr.breaker = cooldown.New(g.cfg.Cooldown, g.clock)
		}
		rt.keys = append(rt.keys, kr)
		t.keys[k.ID] = kr
	}
	return rt
}

// limiter returns the route's concurrency limiter, kept across rebuilds so
// in-flight counts survive a configuration change; nil when unlimited.
func (g *Gateway) limiter(r *snapshot.Route) *policy.Limiter {
	return g.keptLimiter(r.ID, r.Policy.MaxConcurrency)
}

// Limiter keys beside route ids (int64): a group's and a provider's.
type (
	groupLimiter    int64
	providerLimiter int64
)

// keptLimiter returns the limiter stored under key, kept across rebuilds
// so in-flight counts survive a configuration change; nil when max is
// unlimited.
func (g *Gateway) keptLimiter(key any, max int) *policy.Limiter {
	if max <= 0 {
		g.limiters.Delete(key)
		return nil
	}
	// A changed max applies to the same limiter, so requests already in
	// flight still count against the new limit.
	if v, ok := g.limiters.Load(key); ok {
		l := v.(*policy.Limiter)
		l.SetMax(max)
		return l
	}
	l := policy.NewLimiter(max)
	g.limiters.Store(key, l)
	return l
}

// target is the deployment (provider, model) of table t; routed for route
// targets.
func (g *Gateway) target(t *table, provider int64, model string, routed bool) *targetRT {
	id := targetID{provider, model}
	return &targetRT{id: id, provider: t.providers[provider], deployState: g.state(id, routed)}
}

// plan turns a resolved address into candidates. Route plans are prebuilt;
// provider and group plans depend on the model the client named.
func (g *Gateway) plan(t *table, a resolve.Address) *routePlan {
	switch a.Kind {
	case resolve.KindRoute:
		return t.routes[a.Route]
	case resolve.KindProvider:
		tg := g.target(t, a.Provider.ID, a.Model, false)
		tg.configured = tg.provider.upstream || len(a.Provider.Models) > 0
		return &routePlan{kind: a.Kind, rr: new(atomic.Uint64), pinned: true,
			targets: []*targetRT{tg}, weights: []int{1}}
	}
	gr := t.groups[a.Group]
	plan := &routePlan{kind: a.Kind, strategy: gr.strategy, rr: gr.rr, policy: a.Group.Policy, limiter: t.groupLimiters[a.Group]}
	for _, m := range a.Group.Members {
		model := resolve.MemberModel(m, a.Model)
		if !m.Provider.Serves(model) {
			continue // its catalog is known and lacks the model
		}
		if rt := t.providers[m.Provider.ID]; rt.upstream {
			if st := g.status(rt); st.Ready && st.Facts.ModelID != model {
				continue // it serves another model
			}
		}
		tg := g.target(t, m.Provider.ID, model, false)
		_, mapped := m.ModelMap[a.Model]
		tg.configured = mapped || tg.provider.upstream || len(m.Provider.Models) > 0
		plan.targets = append(plan.targets, tg)
		plan.weights = append(plan.weights, m.Weight)
	}
	return plan
}

// only narrows a plan to one provider's targets (x-rolter-provider).
func (p *routePlan) only(slug string) *routePlan {
	out := &routePlan{kind: p.kind, route: p.route, strategy: p.strategy, rr: p.rr, pinned: true, policy: p.policy, limiter: p.limiter}
	for i, tg := range p.targets {
		if tg.provider.slug == slug {
			out.targets = append(out.targets, tg)
			out.weights = append(out.weights, p.weights[i])
		}
	}
	return out
}
