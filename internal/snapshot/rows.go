package snapshot

import (
	"github.com/rolter/rolter/internal/store"
)

// rowSet is a routing state by id: what a Holder patches with the rows a
// journal says changed, instead of reading the whole state again. Only the
// Holder holds it (under its lock), so a patch writes it in place.
type rowSet struct {
	orgs        map[int64]store.Org
	projects    map[int64]store.Project
	providers   map[int64]store.Provider
	routes      map[int64]store.Route
	groups      map[int64]store.Group
	virtualKeys map[int64]store.VirtualKey
	adminTokens map[int64]store.AdminToken
}

func byID[T any](rows []T, id func(*T) int64) map[int64]T {
	m := make(map[int64]T, len(rows))
	for i := range rows {
		m[id(&rows[i])] = rows[i]
	}
	return m
}

func newRowSet(st *store.State) *rowSet {
	return &rowSet{
		orgs:        byID(st.Orgs, func(o *store.Org) int64 { return o.ID }),
		projects:    byID(st.Projects, func(p *store.Project) int64 { return p.ID }),
		providers:   byID(st.Providers, func(p *store.Provider) int64 { return p.ID }),
		routes:      byID(st.Routes, func(r *store.Route) int64 { return r.ID }),
		groups:      byID(st.Groups, func(g *store.Group) int64 { return g.ID }),
		virtualKeys: byID(st.VirtualKeys, func(k *store.VirtualKey) int64 { return k.ID }),
		adminTokens: byID(st.AdminTokens, func(a *store.AdminToken) int64 { return a.ID }),
	}
}

// patchKind sets the entities ids changed in m: each id's row from rows,
// or none when rows lacks it (deleted).
func patchKind[T any](m map[int64]T, ids []int64, rows []T, id func(*T) int64) {
	for _, i := range ids {
		delete(m, i)
	}
	for i := range rows {
		m[id(&rows[i])] = rows[i]
	}
}

// patch applies the changes of ids, with their current rows.
func (r *rowSet) patch(ids *store.ChangedIDs, rows *store.State) {
	patchKind(r.orgs, ids.Orgs, rows.Orgs, func(o *store.Org) int64 { return o.ID })
	patchKind(r.projects, ids.Projects, rows.Projects, func(p *store.Project) int64 { return p.ID })
	patchKind(r.providers, ids.Providers, rows.Providers, func(p *store.Provider) int64 { return p.ID })
	patchKind(r.routes, ids.Routes, rows.Routes, func(r *store.Route) int64 { return r.ID })
	patchKind(r.groups, ids.Groups, rows.Groups, func(g *store.Group) int64 { return g.ID })
	patchKind(r.virtualKeys, ids.VirtualKeys, rows.VirtualKeys, func(k *store.VirtualKey) int64 { return k.ID })
	patchKind(r.adminTokens, ids.AdminTokens, rows.AdminTokens, func(a *store.AdminToken) int64 { return a.ID })
}

func values[T any](m map[int64]T) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// state is the set as a store.State, in no particular order (Build needs
// none).
func (r *rowSet) state() *store.State {
	return &store.State{
		Orgs: values(r.orgs), Projects: values(r.projects), Providers: values(r.providers),
		Routes: values(r.routes), Groups: values(r.groups), VirtualKeys: values(r.virtualKeys),
		AdminTokens: values(r.adminTokens),
	}
}
