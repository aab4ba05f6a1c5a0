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
	"github.com/rolter/rolter/internal/pmap"
	"github.com/rolter/rolter/internal/policy"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/resolve"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// table is the gateway's view of one snapshot: everything a request needs,
// resolved once per configuration change. Runtime state (breakers, in-flight
// counts, latency) lives in objects carried over from the previous table by
// identity, so a configuration change does not forget health.
//
// Its maps are persistent (package pmap): a patch copies only the shards
// it writes, so one change costs O(change), not O(catalog) (issue 21).
type table struct {
	g    *Gateway
	snap *snapshot.Snapshot
	// routes hold each route's /v1/models facts and its plan, built on
	// the first request that needs it (lazyplan.go).
	routes pmap.Map[*snapshot.Route, *routeSlot]
	groups pmap.Map[*snapshot.Group, groupRT]
	// groupLimiters are the groups with max_concurrency.
	groupLimiters pmap.Map[*snapshot.Group, *policy.Limiter]
	providers     pmap.Map[int64, *providerRT] // by provider id
	keys          pmap.Map[int64, *keyRT]      // by provider key id
	// models are the /v1/models entries of each org's provider and group
	// addresses, sorted (cmpModel); routes are listed per project. An
	// entry is never written once listed: a patch copies the list, of
	// pointers, and shares the entries it did not derive anew.
	models pmap.Map[*snapshot.Org, []*modelEntry]
	// routed counts the route targets of each deployment: its state
	// never expires while a route targets it.
	routed pmap.Map[targetID, int]
	// ready is each provider's readiness as the table was derived with it
	// (readyView): plans, /v1/models entries and facts read it, not the
	// live cache, so that Refresh re-derives exactly what depends on the
	// providers whose readiness now differs.
	// The common view (ready, nothing discovered) is one shared value
	// (plainReady), so a provider costs the map a pointer.
	ready pmap.Map[int64, *readiness.Status]
}

// tableEdit is a table being derived: editors of its maps, started from
// the previous table's (or empty ones).
type tableEdit struct {
	g    *Gateway
	snap *snapshot.Snapshot
	// prev is the table derived before, whose keys' breakers are kept.
	prev          *table
	routes        *pmap.Editor[*snapshot.Route, *routeSlot]
	groups        *pmap.Editor[*snapshot.Group, groupRT]
	groupLimiters *pmap.Editor[*snapshot.Group, *policy.Limiter]
	providers     *pmap.Editor[int64, *providerRT]
	keys          *pmap.Editor[int64, *keyRT]
	models        *pmap.Editor[*snapshot.Org, []*modelEntry]
	routed        *pmap.Editor[targetID, int]
	ready         *pmap.Editor[int64, *readiness.Status]
}

// edit starts the table of s from base's maps; base nil: from empty ones.
// prev is the table whose key breakers are kept.
func (g *Gateway) edit(s *snapshot.Snapshot, base, prev *table) *tableEdit {
	if base == nil {
		base = &table{}
	}
	if prev == nil {
		prev = &table{}
	}
	return &tableEdit{g: g, snap: s, prev: prev, routes: base.routes.Edit(), groups: base.groups.Edit(),
		groupLimiters: base.groupLimiters.Edit(), providers: base.providers.Edit(), keys: base.keys.Edit(),
		models: base.models.Edit(), routed: base.routed.Edit(), ready: base.ready.Edit()}
}

// table is the table derived.
func (e *tableEdit) table() *table {
	return &table{g: e.g, snap: e.snap, routes: e.routes.Map(), groups: e.groups.Map(), groupLimiters: e.groupLimiters.Map(),
		providers: e.providers.Map(), keys: e.keys.Map(), models: e.models.Map(),
		routed: e.routed.Map(), ready: e.ready.Map()}
}

// status is p's readiness as the table sees it: read from the cache on
// first use, then the same for the whole table (readyView).
func (e *tableEdit) status(p *providerRT) readiness.Status {
	if st, ok := e.ready.Get(p.id); ok {
		return *st
	}
	st := readyView(e.g.status(p))
	if sameView(st, plainReady) {
		e.ready.Set(p.id, &plainReady)
	} else {
		view := st
		e.ready.Set(p.id, &view)
	}
	return st
}

// plainReady is the view of a ready provider with nothing discovered:
// most providers', shared by the tables' ready maps. Never written.
var plainReady = readiness.Status{Ready: true}

// readyView is the part of a readiness status a table is derived from:
// what admission, plans and /v1/models entries read. The rest (the full
// reason, probe times, errors) changes with every probe and is read live
// by the admin views and metrics.
func readyView(st readiness.Status) readiness.Status {
	return readiness.Status{Ready: st.Ready, Class: st.Class, Facts: st.Facts, Stale: st.Stale}
}

// sameView reports whether two readyViews derive the same table.
func sameView(a, b readiness.Status) bool {
	return a.Ready == b.Ready && a.Class == b.Class && a.Facts.Equal(b.Facts) && maps.Equal(a.Stale, b.Stale)
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
	// plan: when a route's plan is built (lazyplan.go), per request for
	// the plans of provider and group addresses (routable.go).
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
	var routed pmap.Map[targetID, int]
	if t := g.table.Load(); t != nil {
		routed = t.routed
	}
	g.states.Range(func(k, v any) bool {
		id, st := k.(targetID), v.(*deployState)
		if routed.At(id) == 0 && now-st.used.Load() > int64(idle) && g.states.CompareAndDelete(id, st) {
			g.nstates.Add(-1)
			g.stateBytes.Add(-stateCost(id))
		}
		return true
	})
}

// providerRT is a provider with its endpoint facts and key pool. A table
// has one per provider, ten thousand in a large catalog, so what most
// providers lack is a nil pointer rather than empty fields (issue 21).
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
	contextLimit     int  // configured context; 0: unknown
	upstream         bool // metadata_source "upstream": model and context are discovered
	// draining is set while the provider's fleet host drains before a
	// restart: no new request goes to it. drain cuts the attempts in
	// flight at the deadline; nil for providers that are not fleet hosts.
	draining bool
	drain    *drainCut
	// prices are what the provider's tokens cost; nil: unpriced (spend.go).
	prices *store.Prices
	// forward is the operator's forward_headers; nil when none.
	forward *forwarding
	// policy is the provider's own policy, combined with its fleet route's
	// when it inherits one; limiter bounds its attempts in flight (nil:
	// unlimited), kept across rebuilds.
	policy  store.Policy
	limiter *policy.Limiter
	obs     atomic.Pointer[provObs] // its metric children, made on first use (observe.go)
}

// forwarding is a provider's forward_headers: canonical names, and
// the prefixes of entries ending in "*".
type forwarding struct {
	names, prefixes []string
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
	e := g.edit(s, nil, prev)
	s.EachOrg(func(o *snapshot.Org) {
		for _, p := range o.Providers.All() {
			e.providers.Set(p.ID, e.providerOf(o, p))
		}
		for _, gr := range o.Groups.All() {
			e.addGroup(gr)
		}
		e.models.Set(o, e.orgModels(o))
		for _, pj := range o.Projects.All() {
			for _, r := range pj.Routes.All() {
				e.addRoute(r)
			}
		}
	})
	return e.table()
}

// patchTable derives the table of s from prev, the table of the snapshot
// s was patched from: the providers, groups and routes d lists are derived
// anew, and so are the plans of the routes that target a provider derived
// anew, and the /v1/models entries of the orgs whose providers or groups
// changed; everything else, plans and their runtime state included, is
// prev's (issue 21).
func (g *Gateway) patchTable(s *snapshot.Snapshot, prev *table, d *snapshot.Diff) *table {
	e := g.edit(s, prev, prev)
	models := remodels{} // what of the orgs' /v1/models entries changes
	replan := map[*snapshot.Route]bool{}
	for _, id := range d.Providers {
		if old := prev.providers.At(id); old != nil {
			for _, k := range old.keys {
				e.keys.Delete(k.id)
			}
			e.providers.Delete(id)
		}
		e.ready.Delete(id) // read anew: its endpoint may have changed
		// Its entries as they were go, whether it is gone or changed; the
		// groups over it are in d.Groups.
		if was := prev.snap.Provider(id); was != nil {
			models.dropProvider(was)
		}
		p := s.Provider(id)
		if p == nil {
			continue
		}
		e.providers.Set(id, e.providerOf(s.OrgByID(p.OrgID), p))
		models.addProvider(p)
		s.RoutesOf(id, func(r *snapshot.Route) { replan[r] = true })
	}
	// A fleet host's provider follows its route's policy: a route written
	// re-derives the providers that inherit from it, and their routes.
	inherits := map[int64]bool{}
	heirs := map[*snapshot.Org]map[int64]bool{} // the providers re-derived so, by org
	for _, c := range d.Routes {
		for _, r := range []*snapshot.Route{c.Old, c.New} {
			if r != nil {
				inherits[r.ID] = true
			}
		}
	}
	for id := range inherits {
		s.Heirs(id, func(p *snapshot.Provider) {
			if !slices.Contains(d.Providers, p.ID) {
				o := s.OrgByID(p.OrgID)
				e.providers.Set(p.ID, e.providerOf(o, p))
				models.dropProvider(p) // the same object: same slug, same org
				models.addProvider(p)
				if heirs[o] == nil {
					heirs[o] = map[int64]bool{}
				}
				heirs[o][p.ID] = true
				s.RoutesOf(p.ID, func(r *snapshot.Route) { replan[r] = true })
			}
		})
	}
	// The groups over an heir read its policy.
	for o, ids := range heirs {
		models.groupsOver(o, ids)
	}
	for _, c := range d.Groups {
		if c.Old != nil {
			e.groups.Delete(c.Old)
			e.groupLimiters.Delete(c.Old)
			models.dropGroup(c.Old)
		}
		if c.New != nil {
			e.addGroup(c.New)
			models.addGroup(c.New)
		}
	}
	for _, c := range d.Routes {
		if c.Old != nil {
			e.dropRoute(c.Old)
		}
		if c.New != nil {
			replan[c.New] = true
		}
	}
	for r := range replan {
		e.dropRoute(r) // the same route, over a provider derived anew
		e.addRoute(r)
	}
	for _, c := range d.Orgs {
		e.models.Delete(c.Old)
		if r := models[c.New.ID]; r != nil {
			e.models.Set(c.New, e.patchModels(prev.models.At(c.Old), r))
		} else {
			e.models.Set(c.New, prev.models.At(c.Old))
		}
	}
	return e.table()
}

// refreshTable is prev with what depends on the providers whose readiness
// changed since prev was derived derived anew: the plans of the routes
// over them and their orgs' /v1/models entries. It is prev itself when
// none changed.
func (g *Gateway) refreshTable(prev *table) *table {
	var changed []int64
	for id, seen := range prev.ready.All() {
		if p := prev.providers.At(id); p != nil && !sameView(*seen, readyView(g.status(p))) {
			changed = append(changed, id)
		}
	}
	if len(changed) == 0 {
		return prev
	}
	s := prev.snap
	e := g.edit(s, prev, prev)
	models := remodels{}
	flipped := map[*snapshot.Org]map[int64]bool{} // by org
	replan := map[*snapshot.Route]bool{}
	for _, id := range changed {
		e.ready.Delete(id)
		if p := s.Provider(id); p != nil {
			o := s.OrgByID(p.OrgID)
			models.dropProvider(p)
			models.addProvider(p)
			if flipped[o] == nil {
				flipped[o] = map[int64]bool{}
			}
			flipped[o][id] = true
			s.RoutesOf(id, func(r *snapshot.Route) { replan[r] = true })
		}
	}
	for o, ids := range flipped {
		models.groupsOver(o, ids)
	}
	for r := range replan {
		e.dropRoute(r)
		e.addRoute(r)
	}
	for o := range flipped {
		e.models.Set(o, e.patchModels(prev.models.At(o), models[o.ID]))
	}
	return e.table()
}

// providerOf derives provider p of org o: its runtime, with the policy it
// inherits from its fleet route, its limiter and its drain state.
func (e *tableEdit) providerOf(o *snapshot.Org, p *snapshot.Provider) *providerRT {
	g, s := e.g, e.snap
	rt := g.providerRT(o.Name, p, e.prev, e)
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

// selector is strategy if the balancer knows it, else weighted; kind and
// name say whose it is ("route", the model), joined only for the log.
func (g *Gateway) selector(strategy, kind, name string) string {
	if _, err := balancer.New(strategy); err != nil { // the admin API validates strategies; stay up regardless
		g.log.Error("unknown strategy; using weighted", "for", kind+" "+name, "err", err)
		return balancer.Weighted
	}
	return strategy
}

// addGroup derives group gr's balancing and limiter.
func (e *tableEdit) addGroup(gr *snapshot.Group) {
	g := e.g
	e.groups.Set(gr, groupRT{strategy: g.selector(gr.Strategy, "group", gr.Slug), rr: new(atomic.Uint64)})
	if l := g.keptLimiter(groupLimiter(gr.ID), gr.Policy.MaxConcurrency); l != nil {
		e.groupLimiters.Set(gr, l)
	} else {
		e.groupLimiters.Delete(gr)
	}
}

// orgModels are the /v1/models entries of o's provider and group
// addresses, sorted (cmpModel).
func (e *tableEdit) orgModels(o *snapshot.Org) []*modelEntry {
	var models []modelEntry
	for _, p := range o.Providers.All() {
		models = e.providerModels(models, p)
	}
	for _, gr := range o.Groups.All() {
		models = e.groupModels(models, gr)
	}
	return sortedRefs(models)
}

// sortedRefs are pointers to models, sorted (cmpModel).
func sortedRefs(models []modelEntry) []*modelEntry {
	refs := make([]*modelEntry, len(models))
	for i := range models {
		refs[i] = &models[i]
	}
	slices.SortFunc(refs, cmpModel)
	return refs
}

// cmpModel orders an org's /v1/models entries by id, and entries of one
// id by kind and owner, so that the order is the same however the list
// was derived (a full derivation or a patch).
func cmpModel(a, b *modelEntry) int {
	if c := strings.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	if c := strings.Compare(a.AddressKind, b.AddressKind); c != 0 {
		return c
	}
	return strings.Compare(a.OwnedBy, b.OwnedBy)
}

// providerModels appends the /v1/models entries of provider p's address
// to models.
func (e *tableEdit) providerModels(models []modelEntry, p *snapshot.Provider) []modelEntry {
	rt := e.providers.At(p.ID)
	st := e.status(rt)
	if !st.Ready {
		return models
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
	return models
}

// groupModels appends the /v1/models entries of group gr's address to
// models: the union of its ready members' models.
func (e *tableEdit) groupModels(models []modelEntry, gr *snapshot.Group) []modelEntry {
	union := map[string]int{}            // model -> pool context (minimum known)
	governs := map[string]store.Policy{} // model -> strictest policy over its members
	for _, m := range gr.Members {
		rt := e.providers.At(m.Provider.ID)
		st := e.status(rt)
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
	return models
}

// modelOwner is whose /v1/models entries an entry is: a provider's or
// a group's address, by kind and slug.
type modelOwner struct{ kind, slug string }

// remodel is what a patch changes of one org's /v1/models entries: the
// entries of the owners in drop go (as they were derived before), and
// those of providers and groups are derived anew.
type remodel struct {
	drop      map[modelOwner]bool
	providers map[*snapshot.Provider]bool
	groups    map[*snapshot.Group]bool
}

// remodels are the remodels of a patch, by org id.
type remodels map[int64]*remodel

func (rs remodels) of(org int64) *remodel {
	r := rs[org]
	if r == nil {
		r = &remodel{drop: map[modelOwner]bool{}, providers: map[*snapshot.Provider]bool{}, groups: map[*snapshot.Group]bool{}}
		rs[org] = r
	}
	return r
}

// dropProvider and dropGroup remove the entries of a provider or group
// as it was; addProvider and addGroup derive them as it is.
func (rs remodels) dropProvider(p *snapshot.Provider) {
	rs.of(p.OrgID).drop[modelOwner{string(resolve.KindProvider), p.Slug}] = true
}

func (rs remodels) dropGroup(gr *snapshot.Group) {
	rs.of(gr.OrgID).drop[modelOwner{string(resolve.KindGroup), gr.Slug}] = true
}

func (rs remodels) addProvider(p *snapshot.Provider) { rs.of(p.OrgID).providers[p] = true }

func (rs remodels) addGroup(gr *snapshot.Group) { rs.of(gr.OrgID).groups[gr] = true }

// groupsOver re-derives the groups of org o that have a member in ids:
// their entries read their members' providers.
func (rs remodels) groupsOver(o *snapshot.Org, ids map[int64]bool) {
	for _, gr := range o.Groups.All() {
		if slices.ContainsFunc(gr.Members, func(m snapshot.Member) bool { return ids[m.Provider.ID] }) {
			rs.dropGroup(gr)
			rs.addGroup(gr)
		}
	}
}

// patchModels is old, an org's sorted /v1/models entries, with r
// applied: the entries of r's dropped owners removed and those of its
// providers and groups derived and merged in. It costs the changed
// owners' entries, a binary search per owner and a copy of old, rather
// than a derivation and sort of the whole org (issue 21): the list is
// of pointers, so the copy is of 8 bytes an entry.
func (e *tableEdit) patchModels(old []*modelEntry, r *remodel) []*modelEntry {
	var fresh []modelEntry
	for p := range r.providers {
		fresh = e.providerModels(fresh, p)
	}
	for gr := range r.groups {
		fresh = e.groupModels(fresh, gr)
	}
	refs := sortedRefs(fresh)
	// An owner's entries have ids that start with its slug and "/", and
	// sorted by id those are one run (which may hold other owners').
	var gone []int // indices in old
	for o := range r.drop {
		prefix := o.slug + "/"
		i, _ := slices.BinarySearchFunc(old, prefix, func(m *modelEntry, id string) int { return strings.Compare(m.ID, id) })
		for ; i < len(old) && strings.HasPrefix(old[i].ID, prefix); i++ {
			if old[i].OwnedBy == o.slug && old[i].AddressKind == o.kind {
				gone = append(gone, i)
			}
		}
	}
	slices.Sort(gone)
	out := make([]*modelEntry, 0, len(old)-len(gone)+len(refs))
	// old[:i] are placed; keep places old[i:to], less the gone.
	i := 0
	keep := func(to int) {
		for len(gone) > 0 && gone[0] < to {
			out = append(out, old[i:gone[0]]...)
			i, gone = gone[0]+1, gone[1:]
		}
		out = append(out, old[i:to]...)
		i = to
	}
	for _, m := range refs {
		j, _ := slices.BinarySearchFunc(old[i:], m, cmpModel)
		keep(i + j)
		out = append(out, m)
	}
	keep(len(old))
	return out
}

// addRoute derives what of route r the table needs before a request
// does: its slot (whose plan is built on first use, lazyplan.go) with its
// limiter and its /v1/models facts, and the routed counts of its targets.
func (e *tableEdit) addRoute(r *snapshot.Route) {
	g := e.g
	slot := &routeSlot{limiter: g.limiter(r)}
	governs, ctx := r.Policy, 0
	for _, tg := range r.Targets {
		p := e.providers.At(tg.Provider.ID)
		id := targetID{p.id, tg.UpstreamModel}
		e.routed.Set(id, e.routed.At(id)+1)
		// Read even when not needed here: the plan, built later, reads
		// the table's view of it, which Refresh must know to compare.
		st := e.status(p)
		if tg.Weight <= 0 {
			continue
		}
		if p.draining {
			slot.serving = true // listed while it restarts: callers get 503 pool_draining, not 404
			continue
		}
		target := targetRT{id: id, provider: p, ctxLimit: tg.ContextLimit}
		if st.Ready && g.unroutable(&target, st, r.Model) == "" {
			slot.serving = true
			governs = policy.Strictest(governs, p.policy)
			if c := contextOf(&target, st); c > 0 && (ctx == 0 || c < ctx) {
				ctx = c
			}
		}
	}
	slot.context = ctx
	if governs != r.Policy {
		stricter := governs
		slot.governs = &stricter
	}
	e.routes.Set(r, slot)
}

// dropRoute removes route r's slot and its targets' routed counts, if it
// has one.
func (e *tableEdit) dropRoute(r *snapshot.Route) {
	if e.routes.At(r) != nil {
		for _, tg := range r.Targets {
			id := targetID{tg.Provider.ID, tg.UpstreamModel}
			if n := e.routed.At(id) - 1; n > 0 {
				e.routed.Set(id, n)
			} else {
				e.routed.Delete(id)
			}
		}
	}
	e.routes.Delete(r)
}

func (g *Gateway) providerRT(org string, p *snapshot.Provider, prev *table, t *tableEdit) *providerRT {
	rt := &providerRT{id: p.ID, org: org, slug: p.Slug, kind: p.Kind, pairs: pairingsFor(p.Kind), base: strings.TrimRight(p.BaseURL, "/"),
		firstByteTimeout: g.cfg.FirstByteTimeout, idleTimeout: g.cfg.IdleTimeout,
		upstream: p.MetadataSource == store.MetadataUpstream, contextLimit: p.ContextLimit, policy: p.Settings.Policy, prices: p.Settings.Prices}
	if d := time.Duration(p.Settings.FirstByteTimeout); d > 0 {
		rt.firstByteTimeout = d
	}
	if d := time.Duration(p.Settings.IdleTimeout); d > 0 {
		rt.idleTimeout = d
	}
	if len(p.Settings.ForwardHeaders) > 0 {
		rt.forward = &forwarding{}
	}
	for _, h := range p.Settings.ForwardHeaders {
		if pre, ok := strings.CutSuffix(h, "*"); ok {
			rt.forward.prefixes = append(rt.forward.prefixes, pre)
		} else {
			rt.forward.names = append(rt.forward.names, http.CanonicalHeaderKey(h))
		}
	}
	for _, k := range p.Keys {
		kr := &keyRT{id: k.ID, weight: k.Weight, auth: "Bearer " + k.Secret.Reveal(), secret: k.Secret.Reveal()}
		// A key keeps its breaker across rebuilds until its secret is
		// edited: a new secret starts clean (a refused one may work now).
		if old := prev.keys.At(k.ID); old != nil && old.secret == kr.secret {
			kr.breaker = old.breaker
		} else {
			kr.breaker = cooldown.New(g.cfg.Cooldown, g.clock)
		}
		rt.keys = append(rt.keys, kr)
		t.keys.Set(k.ID, kr)
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
	return g.targetOf(t.providers.At(provider), model, routed)
}

// targetOf is the deployment (p, model).
func (g *Gateway) targetOf(p *providerRT, model string, routed bool) *targetRT {
	id := targetID{p.id, model}
	return &targetRT{id: id, provider: p, deployState: g.state(id, routed)}
}

// plan turns a resolved address into candidates. Route plans are built
// once per table (lazyplan.go); provider and group plans depend on the
// model the client named.
func (g *Gateway) plan(t *table, a resolve.Address) *routePlan {
	switch a.Kind {
	case resolve.KindRoute:
		return t.routePlan(a.Route)
	case resolve.KindProvider:
		tg := g.target(t, a.Provider.ID, a.Model, false)
		tg.configured = tg.provider.upstream || len(a.Provider.Models) > 0
		return &routePlan{kind: a.Kind, rr: new(atomic.Uint64), pinned: true,
			targets: []*targetRT{tg}, weights: []int{1}}
	}
	gr := t.groups.At(a.Group)
	plan := &routePlan{kind: a.Kind, strategy: gr.strategy, rr: gr.rr, policy: a.Group.Policy, limiter: t.groupLimiters.At(a.Group)}
	for _, m := range a.Group.Members {
		model := resolve.MemberModel(m, a.Model)
		if !m.Provider.Serves(model) {
			continue // its catalog is known and lacks the model
		}
		if rt := t.providers.At(m.Provider.ID); rt.upstream {
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
