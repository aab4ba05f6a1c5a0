// Package snapshot is the in-memory routing state the request path reads.
//
// A Snapshot is built from one consistent store.State and never changes
// afterwards; Holder swaps in a new one atomically after every admin write
// (SPEC §9: no store query per request). Readers take Holder.Current once
// per request and use that value throughout, so a request never sees half
// of an update.
package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/pmap"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// Snapshot is an immutable view of the routing state.
type Snapshot struct {
	// BuiltAt is when the state was read.
	BuiltAt time.Time

	// Maps are persistent (package pmap), so that a patch copies only
	// what it changes of them (issue 21).
	orgs        pmap.Map[string, *Org]
	keys        pmap.Map[string, *VirtualKey] // by lookup id
	adminTokens []adminToken
	ix          *index
	// diff is what a patch changed from the snapshot before (DiffFrom);
	// nil for a built one. The next patch clears it (under the Holder's
	// lock, as DiffFrom runs), so that snapshots do not chain in memory.
	diff *Diff
}

// adminToken is a live (unrevoked) admin token with its scope resolved.
type adminToken struct {
	hash      secret.Hash
	scope     AdminScope
	expiresAt *time.Time
}

// AdminScope is what an admin token may manage: everything, or one org.
type AdminScope struct {
	TokenID int64
	// OrgID and Org name the token's one org; 0 and "" for a global token.
	OrgID int64
	Org   string
}

// Global reports whether the scope is every org.
func (a AdminScope) Global() bool { return a.OrgID == 0 }

// Org is an org with its live providers and its projects.
type Org struct {
	store.Org
	// Providers are the live (not soft-deleted) providers by slug.
	Providers pmap.Map[string, *Provider]
	// Groups by slug; provider and group slugs never collide.
	Groups   pmap.Map[string, *Group]
	Projects pmap.Map[string, *Project]
}

// Provider is a live provider with its opened key pool.
type Provider struct {
	store.Provider
	// Catalog is every model the provider is known to serve, sorted, each
	// once: its configured models and the upstream models routes send it.
	Catalog []string
}

// Serves reports whether the provider is known to serve model. A provider
// whose catalog is unknown (nothing configured) serves everything.
func (p *Provider) Serves(model string) bool {
	if len(p.Models) == 0 {
		return true
	}
	_, ok := slices.BinarySearch(p.Catalog, model)
	return ok
}

// Group is a provider group with its live members.
type Group struct {
	store.Group
	Members []Member
}

// Member is a group member resolved to its live provider.
type Member struct {
	store.GroupMember
	Provider *Provider
}

// Project is a project with its routes.
type Project struct {
	store.Project
	Org    *Org
	Routes pmap.Map[string, *Route] // by model
}

// Route is a route whose targets point at live providers only.
type Route struct {
	// Route is the route's row, except that its Targets are nil when
	// every target is live: they are then the Target of each of the
	// Targets below, and kept once (issue 21). Row returns the whole row.
	store.Route
	Targets []Target
}

// Row is the route's store row, with every target, live or not.
func (r *Route) Row() store.Route {
	row := r.Route
	if row.Targets == nil && len(r.Targets) > 0 {
		row.Targets = make([]store.Target, len(r.Targets))
		for i := range r.Targets {
			row.Targets[i] = r.Targets[i].Target
		}
	}
	return row
}

// eachTarget calls fn with every target of the route's row, live or not,
// in order, without copying them (Row does).
func (r *Route) eachTarget(fn func(*store.Target)) {
	if r.Route.Targets != nil {
		for i := range r.Route.Targets {
			fn(&r.Route.Targets[i])
		}
		return
	}
	for i := range r.Targets {
		fn(&r.Targets[i].Target)
	}
}

// Target is a route target resolved to its provider.
type Target struct {
	store.Target
	Provider *Provider
}

// VirtualKey is a client key with its project.
type VirtualKey struct {
	store.VirtualKey
	Project *Project
}

// Build indexes st. It never fails: rows that refer to missing parents
// (which foreign keys prevent) are skipped.
func Build(st *store.State, at time.Time) *Snapshot {
	s := &Snapshot{BuiltAt: at}
	var (
		orgs          pmap.Editor[string, *Org]
		oix           pmap.Editor[int64, *Org]
		pix           pmap.Editor[int64, *Provider]
		jix           pmap.Editor[int64, *Project]
		rix           pmap.Editor[int64, *Route]
		gix           pmap.Editor[int64, *Group]
		kix           pmap.Editor[int64, *VirtualKey]
		keys          pmap.Editor[string, *VirtualKey]
		provs, groups = map[*Org]*pmap.Editor[string, *Provider]{}, map[*Org]*pmap.Editor[string, *Group]{}
		projects      = map[*Org]*pmap.Editor[string, *Project]{}
		routes        = map[*Project]*pmap.Editor[string, *Route]{}
		routesOf      = map[int64][]int64{}
		heirs         = map[int64][]int64{}
		// targets are every route's targets, and ids every routesOf's,
		// each allocated at once: one array, not one per route or an
		// append's spare room per provider (issue 21).
		targets []Target
		ids     []int64
	)
	for _, o := range st.Orgs {
		org := &Org{Org: o}
		orgs.Set(o.Name, org)
		oix.Set(o.ID, org)
		provs[org], groups[org], projects[org] = &pmap.Editor[string, *Provider]{}, &pmap.Editor[string, *Group]{}, &pmap.Editor[string, *Project]{}
	}
	for _, p := range st.Providers {
		org := oix.At(p.OrgID)
		if org == nil || p.DeletedAt != nil {
			continue
		}
		pv := newProvider(p)
		provs[org].Set(p.Slug, pv)
		pix.Set(p.ID, pv)
		if r := p.Settings.PolicyRoute; r != 0 {
			heirs[r] = append(heirs[r], p.ID)
		}
	}
	s.ix = &index{providers: pix.Map()}
	for _, p := range st.Projects {
		org := oix.At(p.OrgID)
		if org == nil {
			continue
		}
		pj := &Project{Project: p, Org: org}
		projects[org].Set(p.Name, pj)
		jix.Set(p.ID, pj)
		routes[pj] = &pmap.Editor[string, *Route]{}
	}
	counts := map[int64]int{} // targets per provider
	n := 0
	for _, r := range st.Routes {
		if jix.At(r.ProjectID) != nil {
			for _, t := range r.Targets {
				counts[t.ProviderID]++
			}
			n += len(r.Targets)
		}
	}
	targets, ids = make([]Target, n), make([]int64, n)
	for p, c := range counts {
		routesOf[p], ids = ids[:0:c], ids[c:]
	}
	for _, r := range st.Routes {
		pj := jix.At(r.ProjectID)
		if pj == nil {
			continue
		}
		for _, t := range r.Targets {
			routesOf[t.ProviderID] = append(routesOf[t.ProviderID], r.ID)
			if pv := pix.At(t.ProviderID); pv != nil {
				pv.Catalog = append(pv.Catalog, targetModel(t, r.Model))
			}
		}
		rt := s.route(r, &targets)
		routes[pj].Set(r.Model, rt)
		rix.Set(r.ID, rt)
	}
	for _, pv := range s.ix.providers.All() {
		pv.Catalog = setOf(pv.Catalog)
	}
	for _, g := range st.Groups {
		org := oix.At(g.OrgID)
		if org == nil || g.DeletedAt != nil { // soft-deleted: slug reserved, out of routing
			continue
		}
		grp := s.group(g)
		groups[org].Set(g.Slug, grp)
		gix.Set(g.ID, grp)
	}
	for pj, e := range routes {
		pj.Routes = e.Map()
	}
	for org, e := range provs {
		org.Providers, org.Groups, org.Projects = e.Map(), groups[org].Map(), projects[org].Map()
	}
	for _, k := range st.VirtualKeys {
		if pj := jix.At(k.ProjectID); pj != nil {
			vk := &VirtualKey{VirtualKey: k, Project: pj}
			keys.Set(k.Lookup, vk)
			kix.Set(k.ID, vk)
		}
	}
	s.orgs, s.keys = orgs.Map(), keys.Map()
	s.ix = &index{orgs: oix.Map(), projects: jix.Map(), providers: pix.Map(), routes: rix.Map(), groups: gix.Map(),
		keys: kix.Map(), routesOf: pmap.Of(routesOf), heirs: pmap.Of(heirs)}
	s.adminTokens = s.tokens(st.AdminTokens)
	return s
}

// newProvider is p with its configured models in its catalog; the models
// routes send it are appended by the caller, which then makes Catalog a
// set (setOf).
func newProvider(p store.Provider) *Provider {
	return &Provider{Provider: p, Catalog: slices.Clone(p.Models)}
}

// index finds a snapshot's entities by id, for patches (patch.go).
type index struct {
	orgs      pmap.Map[int64, *Org]
	projects  pmap.Map[int64, *Project]
	providers pmap.Map[int64, *Provider] // live ones
	routes    pmap.Map[int64, *Route]
	groups    pmap.Map[int64, *Group] // live ones
	keys      pmap.Map[int64, *VirtualKey]
	// routesOf are the ids of the routes with a target to a provider,
	// live or not; a slice is never written once in the map.
	routesOf pmap.Map[int64, []int64]
	// heirs are the ids of the live providers that inherit a route's
	// policy (a fleet host's), by route id; slices as in routesOf.
	heirs pmap.Map[int64, []int64]
}

// targetModel is the model a target's provider is sent for a route's
// requests.
func targetModel(t store.Target, route string) string {
	if t.UpstreamModel != "" {
		return t.UpstreamModel
	}
	return route
}

// route resolves r's targets to the snapshot's live providers. Its
// Targets are taken from the front of *slab when that has room (a Build
// allocates every route's targets at once), else allocated.
func (s *Snapshot) route(r store.Route, slab *[]Target) *Route {
	rt := &Route{Route: r}
	live := 0
	for _, t := range r.Targets {
		if s.ix.providers.At(t.ProviderID) != nil {
			live++
		}
	}
	if live > 0 {
		if slab != nil && len(*slab) >= live {
			rt.Targets, *slab = (*slab)[:0:live], (*slab)[live:]
		} else {
			rt.Targets = make([]Target, 0, live)
		}
	}
	for _, t := range r.Targets {
		if pv := s.ix.providers.At(t.ProviderID); pv != nil {
			rt.Targets = append(rt.Targets, Target{Target: t, Provider: pv})
		}
	}
	if live == len(r.Targets) {
		rt.Route.Targets = nil // the same as rt.Targets'
	} else {
		// Its own copy: r's may be part of an array of every route's.
		rt.Route.Targets = slices.Clone(r.Targets)
	}
	return rt
}

// group resolves g's members to the snapshot's live providers.
func (s *Snapshot) group(g store.Group) *Group {
	grp := &Group{Group: g}
	for _, m := range g.Members {
		if pv := s.ix.providers.At(m.ProviderID); pv != nil { // soft-deleted: out of rotation
			grp.Members = append(grp.Members, Member{GroupMember: m, Provider: pv})
		}
	}
	return grp
}

// tokens are the live admin tokens of ts with their scopes.
func (s *Snapshot) tokens(ts []store.AdminToken) []adminToken {
	var out []adminToken
	for _, a := range ts {
		if a.RevokedAt != nil {
			continue
		}
		sc := AdminScope{TokenID: a.ID}
		if a.OrgID != 0 {
			org := s.ix.orgs.At(a.OrgID)
			if org == nil { // a foreign key prevents it; never widen to global
				continue
			}
			sc.OrgID, sc.Org = org.ID, org.Name
		}
		out = append(out, adminToken{hash: a.Hash, scope: sc, expiresAt: a.ExpiresAt})
	}
	return out
}

// setOf is ms sorted, each once, in a slice of its own length (a provider
// of a thousand routes to one model appends that model a thousand times):
// a catalog is a sorted slice rather than a map, which costs a provider
// of one model a few hundred bytes more (issue 21).
func setOf(ms []string) []string {
	if len(ms) == 0 {
		return []string{} // readers encode it as a JSON list
	}
	slices.Sort(ms)
	return slices.Clone(slices.Compact(ms))
}

// Org returns the org by name.
func (s *Snapshot) Org(name string) *Org { return s.orgs.At(name) }

// AdminAuthorize returns the scope of token if it is a live admin token at
// now: stored, not revoked, not expired. It compares against every stored
// hash in constant time, so timing reveals neither which token matched nor
// how much of one did.
func (s *Snapshot) AdminAuthorize(token string, now time.Time) (AdminScope, bool) {
	if token == "" {
		return AdminScope{}, false
	}
	h := secret.HashOf(token)
	var (
		found AdminScope
		ok    bool
	)
	for i := range s.adminTokens {
		a := &s.adminTokens[i]
		if a.hash.Equal(h) && (a.expiresAt == nil || now.Before(*a.expiresAt)) {
			found, ok = a.scope, true
		}
	}
	return found, ok
}

// Authenticate returns the virtual key for token if it is valid at now:
// known, matching in constant time, not revoked and not expired.
func (s *Snapshot) Authenticate(token string, now time.Time) (*VirtualKey, bool) {
	lookup, ok := secret.Lookup(secret.PrefixVirtualKey, token)
	if !ok {
		return nil, false
	}
	k := s.keys.At(lookup)
	if k == nil || !k.Hash.Equal(secret.HashOf(token)) {
		return nil, false
	}
	if k.RevokedAt != nil || (k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)) {
		return nil, false
	}
	return k, true
}

// Loader reads the routing state. Load must return one consistent state
// (every row read in one transaction), or an error and no state. It is the
// part of store.Store a Holder needs.
type Loader interface {
	Load(ctx context.Context) (*store.State, error)
}

// Journal is a Loader that can also say what changed since a position of
// its change journal (store/sqlstore): a Holder on one re-reads only the
// entities written since its last snapshot (issue 21).
type Journal interface {
	Loader
	// LoadAt is Load, with the journal position of the state.
	LoadAt(ctx context.Context) (*store.State, int64, error)
	// LoadChanges reads what changed since the position since: ids and
	// rows, or the whole state when the journal cannot tell or more than
	// limit entities changed.
	LoadChanges(ctx context.Context, since int64, limit int) (*store.Changes, error)
}

// maxChanges is how many changed entities a Holder re-reads by id; beyond
// it, reading the whole state is as cheap.
const maxChanges = 5000

// Holder owns the current snapshot and rebuilds it from the store.
type Holder struct {
	st  Loader
	log *slog.Logger
	cur atomic.Pointer[Snapshot]
	mu  sync.Mutex // serialises rebuilds so an older read never wins
	// onSwap are called, under mu, with each new snapshot: consumers derive
	// their own tables there, once per change rather than per request.
	onSwap []func(*Snapshot)
	// journaled says the current snapshot was read from st as a Journal,
	// at position pos; tokens are its admin tokens' rows, which it keeps
	// only resolved (under mu). Every other row a patch needs is in the
	// snapshot itself (rows.go).
	journaled bool
	pos       int64
	tokens    map[int64]store.AdminToken
	// rebuilds counts new snapshots, fullLoads the reads of the whole
	// state among them.
	rebuilds, fullLoads, patches atomic.Uint64
}

// Rebuilds is how many snapshots the Holder has built: tests check that
// bulk writes rebuild once per batch, not once per entity.
func (h *Holder) Rebuilds() uint64 { return h.rebuilds.Load() }

// FullLoads is how many times the Holder read the whole routing state
// rather than what changed since its last snapshot.
func (h *Holder) FullLoads() uint64 { return h.fullLoads.Load() }

// OnSwap registers fn to run with every new snapshot, before Reload
// returns, and runs it now with the current one if there is one. fn must be
// quick and must not call Reload.
func (h *Holder) OnSwap(fn func(*Snapshot)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onSwap = append(h.onSwap, fn)
	if s := h.cur.Load(); s != nil {
		fn(s)
	}
}

// NewHolder returns a Holder with no snapshot; call Reload before serving.
func NewHolder(st Loader, log *slog.Logger) *Holder {
	return &Holder{st: st, log: log}
}

// Current returns the latest snapshot, or nil before the first Reload.
func (h *Holder) Current() *Snapshot { return h.cur.Load() }

// Reload reads the store and swaps in a new snapshot. On error the current
// snapshot stays in place, so a store outage degrades to stale routing
// rather than no routing. With a Journal, only what changed since the
// current snapshot is read, and the snapshot is patched (patch.go).
func (h *Holder) Reload(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	start := time.Now()
	s, err := h.next(ctx, start)
	if err != nil {
		return fmt.Errorf("snapshot: reload: %w", err)
	}
	if s == nil { // nothing changed
		return nil
	}
	h.rebuilds.Add(1)
	h.cur.Store(s)
	for _, fn := range h.onSwap {
		fn(s)
	}
	h.log.Debug("snapshot rebuilt", "took", time.Since(start))
	return nil
}

// next returns the snapshot after the current one; nil when the journal
// says nothing changed since.
func (h *Holder) next(ctx context.Context, at time.Time) (*Snapshot, error) {
	j, ok := h.st.(Journal)
	if !ok {
		st, err := h.st.Load(ctx)
		if err != nil {
			return nil, err
		}
		h.fullLoads.Add(1)
		return Build(st, at), nil
	}
	cur := h.cur.Load()
	if !h.journaled || cur == nil {
		st, pos, err := j.LoadAt(ctx)
		if err != nil {
			return nil, err
		}
		h.fullLoads.Add(1)
		h.journaled, h.pos, h.tokens = true, pos, tokensByID(st.AdminTokens)
		return Build(st, at), nil
	}
	ch, err := j.LoadChanges(ctx, h.pos, maxChanges)
	if err != nil {
		return nil, err
	}
	if ch.Full != nil {
		h.fullLoads.Add(1)
		h.pos, h.tokens = ch.Pos, tokensByID(ch.Full.AdminTokens)
		return Build(ch.Full, at), nil
	}
	h.pos = ch.Pos
	if ch.IDs.Len() == 0 {
		return nil, nil
	}
	rows := newRows(cur, h.tokens, &ch.IDs, &ch.Rows)
	if s, ok := patch(cur, rows, &ch.IDs, at); ok {
		cur.diff = nil
		h.patches.Add(1)
		return s, nil
	}
	return Build(rows.state(), at), nil
}

// EachOrg calls fn for every org.
func (s *Snapshot) EachOrg(fn func(*Org)) {
	for _, o := range s.orgs.All() {
		fn(o)
	}
}
