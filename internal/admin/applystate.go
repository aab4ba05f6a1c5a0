package admin

import (
	"context"
	"strconv"

	"github.com/rolter/rolter/internal/store"
)

// allHosts reads every host of an org, retired ones included.
func allHosts(ctx context.Context, st store.Store, orgID int64) ([]store.Host, error) {
	var out []store.Host
	page := store.Page{Limit: 1000}
	for {
		rows, err := st.ListHosts(ctx, orgID, page)
		if err != nil {
			return nil, fromStore(err, "hosts")
		}
		out = append(out, rows...)
		if len(rows) < page.Limit {
			return out, nil
		}
		page.After = rows[len(rows)-1].ID
	}
}

// stateIndex is a loaded state by parent, each list in id order, with the
// lookups an apply matches its entries by, so that matching costs the
// same per entry however much exists (a scan of every key per key of a
// large file held the store's transaction for minutes).
type stateIndex struct {
	orgs      map[string]*store.Org
	projects  map[int64][]*store.Project // by org id
	providers map[int64][]*store.Provider
	groups    map[int64][]*store.Group
	routes    map[int64][]*store.Route // by project id
	keys      map[int64][]*store.VirtualKey
	names     map[int64]string // project names by id

	projectByName map[childKey]*store.Project      // by org id and name
	routeByModel  map[childKey]*store.Route        // by project id and model
	liveKeys      map[childKey][]*store.VirtualKey // unrevoked, by project id and name
}

// childKey names an entry by its parent's id and its own name.
type childKey struct {
	parent int64
	name   string
}

func newStateIndex(st *store.State) *stateIndex {
	ix := &stateIndex{orgs: map[string]*store.Org{}, projects: map[int64][]*store.Project{}, providers: map[int64][]*store.Provider{},
		groups: map[int64][]*store.Group{}, routes: map[int64][]*store.Route{}, keys: map[int64][]*store.VirtualKey{}, names: map[int64]string{},
		projectByName: map[childKey]*store.Project{}, routeByModel: map[childKey]*store.Route{}, liveKeys: map[childKey][]*store.VirtualKey{}}
	for i := range st.Orgs {
		ix.orgs[st.Orgs[i].Name] = &st.Orgs[i]
	}
	for i := range st.Projects {
		p := &st.Projects[i]
		ix.projects[p.OrgID] = append(ix.projects[p.OrgID], p)
		ix.names[p.ID] = p.Name
		ix.projectByName[childKey{p.OrgID, p.Name}] = p
	}
	for i := range st.Providers {
		p := &st.Providers[i]
		ix.providers[p.OrgID] = append(ix.providers[p.OrgID], p)
	}
	for i := range st.Groups {
		g := &st.Groups[i]
		ix.groups[g.OrgID] = append(ix.groups[g.OrgID], g)
	}
	for i := range st.Routes {
		r := &st.Routes[i]
		ix.routes[r.ProjectID] = append(ix.routes[r.ProjectID], r)
		ix.routeByModel[childKey{r.ProjectID, r.Model}] = r
	}
	for i := range st.VirtualKeys {
		k := &st.VirtualKeys[i]
		ix.keys[k.ProjectID] = append(ix.keys[k.ProjectID], k)
		if k.RevokedAt == nil {
			at := childKey{k.ProjectID, k.Name}
			ix.liveKeys[at] = append(ix.liveKeys[at], k)
		}
	}
	return ix
}

func (ix *stateIndex) project(orgID int64, name string) *store.Project {
	return ix.projectByName[childKey{orgID, name}]
}

func (ix *stateIndex) projectName(id int64) string {
	if n, ok := ix.names[id]; ok {
		return n
	}
	return strconv.FormatInt(id, 10)
}

// slugIndex is an org's providers or groups (T) by slug and by name, each
// list in id order: what matchSlug looks an entry up in.
type slugIndex[T any] struct {
	bySlug, byName map[string][]*T
}

func indexSlugs[T any](items []*T, keep func(*T) bool, slugOf, nameOf func(*T) string) slugIndex[T] {
	ix := slugIndex[T]{bySlug: map[string][]*T{}, byName: map[string][]*T{}}
	for _, e := range items {
		if keep(e) {
			ix.bySlug[slugOf(e)] = append(ix.bySlug[slugOf(e)], e)
			ix.byName[nameOf(e)] = append(ix.byName[nameOf(e)], e)
		}
	}
	return ix
}

// hostAddr is a host's address as the store keeps it, for matching.
type hostAddr struct {
	ip   string
	port int
}
