package snapshot

import (
	"github.com/rolter/rolter/internal/store"
)

// rows is the routing state after a change set, as a patch reads it: the
// rows of the entities the journal says were written, as read again, and
// every other entity's row as the snapshot before holds it. A snapshot
// keeps the row of each entity it holds (Route.Route, Provider.Provider
// and so on), so a Holder needs no second copy of the catalog to patch
// one (issue 21: that copy was a third of the Holder's memory).
//
// The rows a Build leaves out (soft-deleted providers and groups, rows
// whose parent is missing) are absent here, and a patch treats an absent
// row as a Build treats those: out of routing. Such a row comes back into
// routing only by a write, which the journal reports with its row.
type rows struct {
	base *Snapshot
	// The written entities' rows by id; nil: deleted.
	orgs        map[int64]*store.Org
	projects    map[int64]*store.Project
	providers   map[int64]*store.Provider
	routes      map[int64]*store.Route
	groups      map[int64]*store.Group
	virtualKeys map[int64]*store.VirtualKey
	// adminTokens are every admin token's row, revoked ones included: the
	// snapshot keeps only the live ones, resolved (the Holder's map,
	// patched in place).
	adminTokens map[int64]store.AdminToken
}

// written is the rows of the entities of ids by id, from rows; an id
// without a row maps to nil (deleted).
func written[T any](ids []int64, rows []T, id func(*T) int64) map[int64]*T {
	if len(ids) == 0 {
		return nil
	}
	m := make(map[int64]*T, len(ids))
	for _, i := range ids {
		m[i] = nil
	}
	for i := range rows {
		m[id(&rows[i])] = &rows[i]
	}
	return m
}

// newRows is base's state after the changes of ids, whose current rows
// are ch; tokens, the admin tokens' rows before, is patched in place.
func newRows(base *Snapshot, tokens map[int64]store.AdminToken, ids *store.ChangedIDs, ch *store.State) *rows {
	for _, id := range ids.AdminTokens {
		delete(tokens, id)
	}
	for _, a := range ch.AdminTokens {
		tokens[a.ID] = a
	}
	return &rows{
		base:        base,
		orgs:        written(ids.Orgs, ch.Orgs, func(o *store.Org) int64 { return o.ID }),
		projects:    written(ids.Projects, ch.Projects, func(p *store.Project) int64 { return p.ID }),
		providers:   written(ids.Providers, ch.Providers, func(p *store.Provider) int64 { return p.ID }),
		routes:      written(ids.Routes, ch.Routes, func(r *store.Route) int64 { return r.ID }),
		groups:      written(ids.Groups, ch.Groups, func(g *store.Group) int64 { return g.ID }),
		virtualKeys: written(ids.VirtualKeys, ch.VirtualKeys, func(k *store.VirtualKey) int64 { return k.ID }),
		adminTokens: tokens,
	}
}

// tokensByID are ts by id, for a Holder to patch.
func tokensByID(ts []store.AdminToken) map[int64]store.AdminToken {
	m := make(map[int64]store.AdminToken, len(ts))
	for _, a := range ts {
		m[a.ID] = a
	}
	return m
}

func (r *rows) provider(id int64) *store.Provider {
	if p, ok := r.providers[id]; ok {
		return p
	}
	if pv := r.base.ix.providers.At(id); pv != nil {
		return &pv.Provider
	}
	return nil
}

// route is route id's row as a Route (read its targets with eachTarget or
// Row): base's, or a written row's, whose Targets are then nil.
func (r *rows) route(id int64) *Route {
	if row, ok := r.routes[id]; ok {
		if row == nil {
			return nil
		}
		return &Route{Route: *row}
	}
	return r.base.ix.routes.At(id)
}

func (r *rows) group(id int64) *store.Group {
	if g, ok := r.groups[id]; ok {
		return g
	}
	if g := r.base.ix.groups.At(id); g != nil {
		return &g.Group
	}
	return nil
}

func (r *rows) virtualKey(id int64) *store.VirtualKey {
	if k, ok := r.virtualKeys[id]; ok {
		return k
	}
	if k := r.base.ix.keys.At(id); k != nil {
		return &k.VirtualKey
	}
	return nil
}

// all is every row of one kind: base's, each replaced by its written row
// or left out when deleted, and the written ones base lacks.
func all[T, E any](w map[int64]*T, base func(yield func(int64, E) bool), of func(E) T) []T {
	var out []T
	for id, e := range base {
		if _, ok := w[id]; !ok {
			out = append(out, of(e))
		}
	}
	for _, r := range w {
		if r != nil {
			out = append(out, *r)
		}
	}
	return out
}

// state is the whole state, in no particular order (Build needs none),
// for a Build when a patch cannot do.
func (r *rows) state() *store.State {
	ix := r.base.ix
	st := &store.State{
		Orgs:        all(r.orgs, ix.orgs.All(), func(o *Org) store.Org { return o.Org }),
		Projects:    all(r.projects, ix.projects.All(), func(p *Project) store.Project { return p.Project }),
		Providers:   all(r.providers, ix.providers.All(), func(p *Provider) store.Provider { return p.Provider }),
		Routes:      all(r.routes, ix.routes.All(), (*Route).Row),
		Groups:      all(r.groups, ix.groups.All(), func(g *Group) store.Group { return g.Group }),
		VirtualKeys: all(r.virtualKeys, ix.keys.All(), func(k *VirtualKey) store.VirtualKey { return k.VirtualKey }),
	}
	for _, a := range r.adminTokens {
		st.AdminTokens = append(st.AdminTokens, a)
	}
	return st
}
