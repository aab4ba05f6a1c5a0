package snapshot

import (
	"maps"
	"slices"
	"time"

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
func patch(s *Snapshot, rows *rowSet, ids *store.ChangedIDs, at time.Time) (next *Snapshot, ok bool) {
	if len(ids.Orgs) > 0 || len(ids.Projects) > 0 {
		return nil, false
	}
	n := &Snapshot{BuiltAt: at, orgs: s.orgs, keys: s.keys, adminTokens: s.adminTokens, diff: &Diff{base: s}, ix: &index{
		orgs: s.ix.orgs, projects: s.ix.projects, providers: maps.Clone(s.ix.providers), routes: maps.Clone(s.ix.routes),
		groups: s.ix.groups, keys: s.ix.keys, routesOf: s.ix.routesOf,
	}}
	touched := map[int64]bool{} // org ids
	// Which routes target which providers, after the changes.
	considered := map[int64]bool{}
	for _, p := range ids.Providers {
		considered[p] = true
	}
	if len(ids.Routes) > 0 {
		n.ix.routesOf = maps.Clone(s.ix.routesOf)
		for _, id := range ids.Routes {
			if old := s.ix.routes[id]; old != nil {
				for _, t := range old.Route.Targets {
					considered[t.ProviderID] = true
					n.ix.routesOf[t.ProviderID] = slices.DeleteFunc(slices.Clone(n.ix.routesOf[t.ProviderID]), func(r int64) bool { return r == id })
				}
			}
			if r, ok := rows.routes[id]; ok {
				for _, t := range r.Targets {
					considered[t.ProviderID] = true
					if !slices.Contains(n.ix.routesOf[t.ProviderID], id) {
						n.ix.routesOf[t.ProviderID] = append(slices.Clone(n.ix.routesOf[t.ProviderID]), id)
					}
				}
			}
		}
	}
	// Providers: the written ones, and those whose catalog changed.
	repoint := map[int64]bool{} // providers whose routes and groups point anew
	for p := range considered {
		old := s.ix.providers[p]
		row, ok := rows.providers[p]
		if !ok || row.DeletedAt != nil || n.ix.orgs[row.OrgID] == nil {
			if old != nil {
				delete(n.ix.providers, p)
				repoint[p], touched[old.OrgID] = true, true
			}
			continue
		}
		pv := &Provider{Provider: row, catalog: map[string]bool{}}
		for _, m := range row.Models {
			pv.catalog[m] = true
		}
		for _, rid := range n.ix.routesOf[p] {
			r, ok := rows.routes[rid]
			if !ok || n.ix.projects[r.ProjectID] == nil {
				continue
			}
			for _, t := range r.Targets {
				if t.ProviderID == p {
					pv.catalog[targetModel(t, r.Model)] = true
				}
			}
		}
		pv.Catalog = sortedKeys(pv.catalog)
		if old != nil && !slices.Contains(ids.Providers, p) && slices.Equal(old.Catalog, pv.Catalog) {
			continue // a route's change left it as it was
		}
		if old != nil && old.Slug != row.Slug {
			touched[old.OrgID] = true
		}
		n.ix.providers[p] = pv
		repoint[p], touched[row.OrgID] = true, true
	}
	for p := range repoint {
		n.diff.Providers = append(n.diff.Providers, p)
	}
	// Routes: the written ones, and those of re-pointed providers.
	routes := map[int64]bool{}
	for _, id := range ids.Routes {
		routes[id] = true
	}
	for p := range repoint {
		for _, id := range s.ix.routesOf[p] {
			routes[id] = true
		}
		for _, id := range n.ix.routesOf[p] {
			routes[id] = true
		}
	}
	type routeChange struct {
		old, new *Route
		project  *Project // the new route's (old project's when deleted)
	}
	var changedRoutes []routeChange
	for id := range routes {
		old := s.ix.routes[id]
		var c routeChange
		c.old = old
		if r, ok := rows.routes[id]; ok && n.ix.projects[r.ProjectID] != nil {
			c.new = n.route(r)
			c.project = n.ix.projects[r.ProjectID]
			n.ix.routes[id] = c.new
		} else {
			delete(n.ix.routes, id)
			if old == nil {
				continue
			}
		}
		if old != nil {
			touched[n.ix.projects[old.ProjectID].OrgID] = true
		}
		if c.project != nil {
			touched[c.project.OrgID] = true
		}
		changedRoutes = append(changedRoutes, c)
		n.diff.Routes = append(n.diff.Routes, RouteChange{Old: c.old, New: c.new})
	}
	// Groups: the written ones, and those with a re-pointed member.
	groups := map[int64]bool{}
	for _, id := range ids.Groups {
		groups[id] = true
	}
	if len(repoint) > 0 {
		for id, g := range s.ix.groups {
			for _, m := range g.Group.Members {
				if repoint[m.ProviderID] {
					groups[id] = true
				}
			}
		}
	}
	var changedGroups [][2]*Group // old, new
	if len(groups) > 0 {
		n.ix.groups = maps.Clone(s.ix.groups)
		for id := range groups {
			old := s.ix.groups[id]
			var grp *Group
			if g, ok := rows.groups[id]; ok && g.DeletedAt == nil && n.ix.orgs[g.OrgID] != nil {
				grp = n.group(g)
				n.ix.groups[id] = grp
				touched[g.OrgID] = true
			} else {
				delete(n.ix.groups, id)
			}
			if old != nil {
				touched[old.OrgID] = true
			}
			if old != nil || grp != nil {
				changedGroups = append(changedGroups, [2]*Group{old, grp})
				n.diff.Groups = append(n.diff.Groups, GroupChange{Old: old, New: grp})
			}
		}
	}
	// Keys written.
	for _, id := range ids.VirtualKeys {
		if k := s.ix.keys[id]; k != nil {
			touched[k.Project.OrgID] = true
		}
		if k, ok := rows.virtualKeys[id]; ok {
			if pj := n.ix.projects[k.ProjectID]; pj != nil {
				touched[pj.OrgID] = true
			}
		}
	}
	// The path: each touched org anew, with its projects.
	if len(touched) > 0 {
		n.orgs, n.ix.orgs, n.ix.projects = maps.Clone(s.orgs), maps.Clone(s.ix.orgs), maps.Clone(s.ix.projects)
		for id := range touched {
			old := s.ix.orgs[id]
			org := &Org{Org: old.Org, Providers: old.Providers, Groups: old.Groups, Projects: make(map[string]*Project, len(old.Projects))}
			n.diff.Orgs = append(n.diff.Orgs, OrgChange{Old: old, New: org})
			n.orgs[org.Name], n.ix.orgs[id] = org, org
			for _, pj := range old.Projects {
				np := &Project{Project: pj.Project, Org: org, Routes: pj.Routes}
				org.Projects[np.Name] = np
				n.ix.projects[np.ID] = np
			}
		}
		// Providers of touched orgs, by slug.
		cloned := map[*Org]bool{}
		for p := range repoint {
			var org *Org
			if old := s.ix.providers[p]; old != nil {
				org = n.ix.orgs[old.OrgID]
				cloneOnce(cloned, org, func() { org.Providers = maps.Clone(org.Providers) })
				if org.Providers[old.Slug] == old {
					delete(org.Providers, old.Slug)
				}
			}
			if pv := n.ix.providers[p]; pv != nil {
				org = n.ix.orgs[pv.OrgID]
				cloneOnce(cloned, org, func() { org.Providers = maps.Clone(org.Providers) })
				org.Providers[pv.Slug] = pv
			}
		}
		clonedG := map[*Org]bool{}
		for _, c := range changedGroups {
			if c[0] != nil {
				org := n.ix.orgs[c[0].OrgID]
				cloneOnce(clonedG, org, func() { org.Groups = maps.Clone(org.Groups) })
				if org.Groups[c[0].Slug] == c[0] {
					delete(org.Groups, c[0].Slug)
				}
			}
			if c[1] != nil {
				org := n.ix.orgs[c[1].OrgID]
				cloneOnce(clonedG, org, func() { org.Groups = maps.Clone(org.Groups) })
				org.Groups[c[1].Slug] = c[1]
			}
		}
		clonedR := map[*Project]bool{}
		for _, c := range changedRoutes {
			if c.old != nil {
				pj := n.ix.projects[c.old.ProjectID]
				cloneOnceP(clonedR, pj)
				if pj.Routes[c.old.Model] == c.old {
					delete(pj.Routes, c.old.Model)
				}
			}
			if c.new != nil {
				pj := n.ix.projects[c.new.ProjectID]
				cloneOnceP(clonedR, pj)
				pj.Routes[c.new.Model] = c.new
			}
		}
	}
	// Keys: re-pointed to their touched projects, and the written ones.
	written := map[int64]bool{}
	for _, id := range ids.VirtualKeys {
		written[id] = true
	}
	if len(touched) > 0 || len(written) > 0 {
		n.keys, n.ix.keys = make(map[string]*VirtualKey, len(s.keys)), make(map[int64]*VirtualKey, len(s.ix.keys))
		for lookup, k := range s.keys {
			switch {
			case written[k.ID]:
				continue
			case touched[k.Project.OrgID]:
				k = &VirtualKey{VirtualKey: k.VirtualKey, Project: n.ix.projects[k.ProjectID]}
			}
			n.keys[lookup], n.ix.keys[k.ID] = k, k
		}
		for id := range written {
			if k, ok := rows.virtualKeys[id]; ok {
				if pj := n.ix.projects[k.ProjectID]; pj != nil {
					vk := &VirtualKey{VirtualKey: k, Project: pj}
					n.keys[k.Lookup], n.ix.keys[id] = vk, vk
				}
			}
		}
	}
	if len(ids.AdminTokens) > 0 {
		n.adminTokens = n.tokens(values(rows.adminTokens))
	}
	return n, true
}

func cloneOnce(done map[*Org]bool, o *Org, clone func()) {
	if !done[o] {
		done[o] = true
		clone()
	}
}

func cloneOnceP(done map[*Project]bool, pj *Project) {
	if !done[pj] {
		done[pj] = true
		pj.Routes = maps.Clone(pj.Routes)
	}
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
func (s *Snapshot) Provider(id int64) *Provider { return s.ix.providers[id] }

// Route returns the route with id, or nil.
func (s *Snapshot) Route(id int64) *Route { return s.ix.routes[id] }

// RoutesOf calls fn with every route that has a target to the provider id.
func (s *Snapshot) RoutesOf(id int64, fn func(*Route)) {
	for _, rid := range s.ix.routesOf[id] {
		if r := s.ix.routes[rid]; r != nil {
			fn(r)
		}
	}
}

// Project returns the project with id, or nil.
func (s *Snapshot) Project(id int64) *Project { return s.ix.projects[id] }

// OrgByID returns the org with id, or nil.
func (s *Snapshot) OrgByID(id int64) *Org { return s.ix.orgs[id] }
