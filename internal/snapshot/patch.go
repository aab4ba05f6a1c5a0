package snapshot

import (
	"maps"
	"slices"
	"time"

	"github.com/rolter/rolter/internal/pmap"
	"github.com/rolter/rolter/internal/store"
)

// patch builds the snapshot after s with the changes of ids, whose current
// rows are in rows (issue 21). It copies what the changes reach and shares
// the rest with s: the changed entities, the providers whose catalog they
// change and the routes and groups that point at those, and along the path
// to them their org (its maps of providers, groups and projects), the
// org's projects and the virtual keys that point at those. One route
// written costs its own work plus copies of its org's maps of pointers,
// not a read and build of the catalog. Orgs and projects written (rare:
// created, renamed, deleted) are built anew; ok is false then.
func patch(s *Snapshot, rows *rows, ids *store.ChangedIDs, at time.Time) (next *Snapshot, ok bool) {
	if len(ids.Orgs) > 0 || len(ids.Projects) > 0 {
		return nil, false
	}
	n := &Snapshot{BuiltAt: at, orgs: s.orgs, keys: s.keys, adminTokens: s.adminTokens, diff: &Diff{base: s}, ix: &index{
		orgs: s.ix.orgs, projects: s.ix.projects, providers: s.ix.providers, routes: s.ix.routes,
		groups: s.ix.groups, keys: s.ix.keys, routesOf: s.ix.routesOf, heirs: s.ix.heirs,
	}}
	touched := map[int64]bool{} // org ids
	// Which routes target which providers, after the changes.
	considered := map[int64]bool{}
	for _, p := range ids.Providers {
		considered[p] = true
	}
	if len(ids.Routes) > 0 {
		routesOf := s.ix.routesOf.Edit()
		for _, id := range ids.Routes {
			if old := s.ix.routes.At(id); old != nil {
				old.eachTarget(func(t *store.Target) {
					considered[t.ProviderID] = true
					rs := slices.DeleteFunc(slices.Clone(routesOf.At(t.ProviderID)), func(r int64) bool { return r == id })
					if len(rs) == 0 {
						routesOf.Delete(t.ProviderID)
					} else {
						routesOf.Set(t.ProviderID, rs)
					}
				})
			}
			if r := rows.route(id); r != nil {
				r.eachTarget(func(t *store.Target) {
					considered[t.ProviderID] = true
					if rs := routesOf.At(t.ProviderID); !slices.Contains(rs, id) {
						routesOf.Set(t.ProviderID, append(slices.Clone(rs), id))
					}
				})
			}
		}
		n.ix.routesOf = routesOf.Map()
	}
	// Providers: the written ones, and those whose catalog changed.
	providers, heirs := s.ix.providers.Edit(), s.ix.heirs.Edit()
	repoint := map[int64]bool{} // providers whose routes and groups point anew
	for p := range considered {
		old := s.ix.providers.At(p)
		row := rows.provider(p)
		if row == nil || row.DeletedAt != nil || s.ix.orgs.At(row.OrgID) == nil {
			if old != nil {
				providers.Delete(p)
				inherit(heirs, p, old.Settings.PolicyRoute, 0)
				repoint[p], touched[old.OrgID] = true, true
			}
			continue
		}
		pv := newProvider(*row)
		for _, rid := range n.ix.routesOf.At(p) {
			r := rows.route(rid)
			if r == nil || s.ix.projects.At(r.ProjectID) == nil {
				continue
			}
			r.eachTarget(func(t *store.Target) {
				if t.ProviderID == p {
					pv.Catalog = append(pv.Catalog, targetModel(*t, r.Model))
				}
			})
		}
		pv.Catalog = setOf(pv.Catalog)
		if old != nil && !slices.Contains(ids.Providers, p) && slices.Equal(old.Catalog, pv.Catalog) {
			continue // a route's change left it as it was
		}
		if old != nil && old.Slug != row.Slug {
			touched[old.OrgID] = true
		}
		providers.Set(p, pv)
		was := int64(0)
		if old != nil {
			was = old.Settings.PolicyRoute
		}
		inherit(heirs, p, was, row.Settings.PolicyRoute)
		repoint[p], touched[row.OrgID] = true, true
	}
	n.ix.providers, n.ix.heirs = providers.Map(), heirs.Map()
	for p := range repoint {
		n.diff.Providers = append(n.diff.Providers, p)
	}
	// Routes: the written ones, and those of re-pointed providers.
	routes := map[int64]bool{}
	for _, id := range ids.Routes {
		routes[id] = true
	}
	for p := range repoint {
		for _, id := range s.ix.routesOf.At(p) {
			routes[id] = true
		}
		for _, id := range n.ix.routesOf.At(p) {
			routes[id] = true
		}
	}
	var changedRoutes []RouteChange
	if len(routes) > 0 {
		routeIx := s.ix.routes.Edit()
		for id := range routes {
			c := RouteChange{Old: s.ix.routes.At(id)}
			if r := rows.route(id); r != nil && s.ix.projects.At(r.ProjectID) != nil {
				c.New = n.route(r.Row(), nil)
				routeIx.Set(id, c.New)
				touched[s.ix.projects.At(r.ProjectID).OrgID] = true
			} else {
				routeIx.Delete(id)
				if c.Old == nil {
					continue
				}
			}
			if c.Old != nil {
				touched[s.ix.projects.At(c.Old.ProjectID).OrgID] = true
			}
			changedRoutes = append(changedRoutes, c)
		}
		n.ix.routes = routeIx.Map()
		n.diff.Routes = changedRoutes
	}
	// Groups: the written ones, and those with a re-pointed member.
	groups := map[int64]bool{}
	for _, id := range ids.Groups {
		groups[id] = true
	}
	if len(repoint) > 0 {
		for id, g := range s.ix.groups.All() {
			for _, m := range g.Group.Members {
				if repoint[m.ProviderID] {
					groups[id] = true
				}
			}
		}
	}
	if len(groups) > 0 {
		groupIx := s.ix.groups.Edit()
		for id := range groups {
			c := GroupChange{Old: s.ix.groups.At(id)}
			if g := rows.group(id); g != nil && g.DeletedAt == nil && s.ix.orgs.At(g.OrgID) != nil {
				c.New = n.group(*g)
				groupIx.Set(id, c.New)
				touched[g.OrgID] = true
			} else {
				groupIx.Delete(id)
			}
			if c.Old != nil {
				touched[c.Old.OrgID] = true
			}
			if c.Old != nil || c.New != nil {
				n.diff.Groups = append(n.diff.Groups, c)
			}
		}
		n.ix.groups = groupIx.Map()
	}
	// Keys written.
	for _, id := range ids.VirtualKeys {
		if k := s.ix.keys.At(id); k != nil {
			touched[k.Project.OrgID] = true
		}
		if k := rows.virtualKey(id); k != nil {
			if pj := s.ix.projects.At(k.ProjectID); pj != nil {
				touched[pj.OrgID] = true
			}
		}
	}
	if len(touched) > 0 {
		n.repath(s, touched, changedRoutes)
	}
	n.patchKeys(s, rows, ids, touched)
	if len(ids.AdminTokens) > 0 {
		n.adminTokens = n.tokens(slices.Collect(maps.Values(rows.adminTokens)))
	}
	return n, true
}

// inherit moves provider p from the heirs of route was to those of route
// now; 0: none.
func inherit(heirs *pmap.Editor[int64, []int64], p, was, now int64) {
	if was == now {
		return
	}
	if was != 0 {
		if ps := slices.DeleteFunc(slices.Clone(heirs.At(was)), func(x int64) bool { return x == p }); len(ps) > 0 {
			heirs.Set(was, ps)
		} else {
			heirs.Delete(was)
		}
	}
	if now != 0 {
		heirs.Set(now, append(slices.Clone(heirs.At(now)), p))
	}
}

// repath builds each touched org anew, with its projects, and writes into
// their maps the providers, groups and routes the patch changed.
func (n *Snapshot) repath(s *Snapshot, touched map[int64]bool, changedRoutes []RouteChange) {
	orgs, orgIx, projIx := s.orgs.Edit(), s.ix.orgs.Edit(), s.ix.projects.Edit()
	for id := range touched {
		old := s.ix.orgs.At(id)
		org := &Org{Org: old.Org, Providers: old.Providers, Groups: old.Groups}
		n.diff.Orgs = append(n.diff.Orgs, OrgChange{Old: old, New: org})
		orgs.Set(org.Name, org)
		orgIx.Set(id, org)
		var projects pmap.Editor[string, *Project]
		for _, pj := range old.Projects.All() {
			np := &Project{Project: pj.Project, Org: org, Routes: pj.Routes}
			projects.Set(np.Name, np)
			projIx.Set(np.ID, np)
		}
		org.Projects = projects.Map()
	}
	n.orgs, n.ix.orgs, n.ix.projects = orgs.Map(), orgIx.Map(), projIx.Map()
	// Providers of touched orgs, by slug.
	provs := edits[*Org, *Provider]{}
	for _, p := range n.diff.Providers {
		if old := s.ix.providers.At(p); old != nil {
			org := n.ix.orgs.At(old.OrgID)
			if e := provs.of(org, org.Providers); e.At(old.Slug) == old {
				e.Delete(old.Slug)
			}
		}
		if pv := n.ix.providers.At(p); pv != nil {
			org := n.ix.orgs.At(pv.OrgID)
			provs.of(org, org.Providers).Set(pv.Slug, pv)
		}
	}
	for org, e := range provs {
		org.Providers = e.Map()
	}
	groups := edits[*Org, *Group]{}
	for _, c := range n.diff.Groups {
		if c.Old != nil {
			org := n.ix.orgs.At(c.Old.OrgID)
			if e := groups.of(org, org.Groups); e.At(c.Old.Slug) == c.Old {
				e.Delete(c.Old.Slug)
			}
		}
		if c.New != nil {
			org := n.ix.orgs.At(c.New.OrgID)
			groups.of(org, org.Groups).Set(c.New.Slug, c.New)
		}
	}
	for org, e := range groups {
		org.Groups = e.Map()
	}
	routes := edits[*Project, *Route]{}
	for _, c := range changedRoutes {
		if c.Old != nil {
			pj := n.ix.projects.At(c.Old.ProjectID)
			if e := routes.of(pj, pj.Routes); e.At(c.Old.Model) == c.Old {
				e.Delete(c.Old.Model)
			}
		}
		if c.New != nil {
			pj := n.ix.projects.At(c.New.ProjectID)
			routes.of(pj, pj.Routes).Set(c.New.Model, c.New)
		}
	}
	for pj, e := range routes {
		pj.Routes = e.Map()
	}
}

// edits are the editors of the maps a patch writes, by their owner.
type edits[O comparable, V any] map[O]*pmap.Editor[string, V]

// of is owner's editor, started from m on first use.
func (e edits[O, V]) of(owner O, m pmap.Map[string, V]) *pmap.Editor[string, V] {
	ed := e[owner]
	if ed == nil {
		ed = m.Edit()
		e[owner] = ed
	}
	return ed
}

// patchKeys re-points the keys of touched orgs to their new projects and
// applies the keys written.
func (n *Snapshot) patchKeys(s *Snapshot, rows *rows, ids *store.ChangedIDs, touched map[int64]bool) {
	if len(touched) == 0 && len(ids.VirtualKeys) == 0 {
		return
	}
	keys, keyIx := s.keys.Edit(), s.ix.keys.Edit()
	written := map[int64]bool{}
	for _, id := range ids.VirtualKeys {
		written[id] = true
		if old := s.ix.keys.At(id); old != nil {
			if keys.At(old.Lookup) == old {
				keys.Delete(old.Lookup)
			}
			keyIx.Delete(id)
		}
	}
	if len(touched) > 0 {
		// TODO(issue 21): a scan of every key, though of pointers only;
		// an index of keys by org would make it O(the org's keys).
		for lookup, k := range s.keys.All() {
			if !written[k.ID] && touched[k.Project.OrgID] {
				k = &VirtualKey{VirtualKey: k.VirtualKey, Project: n.ix.projects.At(k.ProjectID)}
				keys.Set(lookup, k)
				keyIx.Set(k.ID, k)
			}
		}
	}
	for id := range written {
		if k := rows.virtualKey(id); k != nil {
			if pj := n.ix.projects.At(k.ProjectID); pj != nil {
				vk := &VirtualKey{VirtualKey: *k, Project: pj}
				keys.Set(k.Lookup, vk)
				keyIx.Set(id, vk)
			}
		}
	}
	n.keys, n.ix.keys = keys.Map(), keyIx.Map()
}

// Diff is what a patched snapshot changed from the one it was patched
// from, for consumers that derive tables from snapshots (the gateway) to
// patch theirs alike. Every entity not listed is the same object in both.
type Diff struct {
	base *Snapshot
	// Orgs are the orgs built anew: every org on the path to a change.
	// Their projects are new objects too; providers, groups and routes
	// not listed below are shared.
	Orgs []OrgChange
	// Providers are the ids of the providers built anew or gone.
	Providers []int64
	// Routes and Groups built anew (New), gone (New nil) or new (Old nil).
	Routes []RouteChange
	Groups []GroupChange
}

// OrgChange is an org's object before and after.
type OrgChange struct{ Old, New *Org }

// RouteChange is a route's object before and after; nil: absent.
type RouteChange struct{ Old, New *Route }

// GroupChange is a group's object before and after; nil: absent.
type GroupChange struct{ Old, New *Group }

// DiffFrom is what s changed from prev, when s was patched from prev;
// nil when s was built anew or from another snapshot.
func (s *Snapshot) DiffFrom(prev *Snapshot) *Diff {
	if s.diff == nil || s.diff.base != prev {
		return nil
	}
	return s.diff
}

// Provider returns the live provider with id, or nil.
func (s *Snapshot) Provider(id int64) *Provider { return s.ix.providers.At(id) }

// Route returns the route with id, or nil.
func (s *Snapshot) Route(id int64) *Route { return s.ix.routes.At(id) }

// RoutesOf calls fn with every route that has a target to the provider id.
func (s *Snapshot) RoutesOf(id int64, fn func(*Route)) {
	for _, rid := range s.ix.routesOf.At(id) {
		if r := s.ix.routes.At(rid); r != nil {
			fn(r)
		}
	}
}

// Heirs calls fn with every live provider that inherits the policy of
// the route id (Settings.PolicyRoute).
func (s *Snapshot) Heirs(id int64, fn func(*Provider)) {
	for _, p := range s.ix.heirs.At(id) {
		if pv := s.ix.providers.At(p); pv != nil {
			fn(pv)
		}
	}
}

// Project returns the project with id, or nil.
func (s *Snapshot) Project(id int64) *Project { return s.ix.projects.At(id) }

// OrgByID returns the org with id, or nil.
func (s *Snapshot) OrgByID(id int64) *Org { return s.ix.orgs.At(id) }
