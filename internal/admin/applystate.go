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

// stateIndex is a loaded state by parent, each list in id order.
type stateIndex struct {
	orgs      map[string]*store.Org
	projects  map[int64][]*store.Project // by org id
	providers map[int64][]*store.Provider
	groups    map[int64][]*store.Group
	routes    map[int64][]*store.Route // by project id
	keys      map[int64][]*store.VirtualKey
	names     map[int64]string // project names by id
}

func newStateIndex(st *store.State) *stateIndex {
	ix := &stateIndex{orgs: map[string]*store.Org{}, projects: map[int64][]*store.Project{}, providers: map[int64][]*store.Provider{},
		groups: map[int64][]*store.Group{}, routes: map[int64][]*store.Route{}, keys: map[int64][]*store.VirtualKey{}, names: map[int64]string{}}
	for i := range st.Orgs {
		ix.orgs[st.Orgs[i].Name] = &st.Orgs[i]
	}
	for i := range st.Projects {
		p := &st.Projects[i]
		ix.projects[p.OrgID] = append(ix.projects[p.OrgID], p)
		ix.names[p.ID] = p.Name
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
	}
	for i := range st.VirtualKeys {
		k := &st.VirtualKeys[i]
		ix.keys[k.ProjectID] = append(ix.keys[k.ProjectID], k)
	}
	return ix
}

func (ix *stateIndex) project(orgID int64, name string) *store.Project {
	for _, p := range ix.projects[orgID] {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (ix *stateIndex) projectName(id int64) string {
	if n, ok := ix.names[id]; ok {
		return n
	}
	return strconv.FormatInt(id, 10)
}
