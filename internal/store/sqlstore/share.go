package sqlstore

import (
	"cmp"
	"slices"

	"github.com/rolter/rolter/internal/store"
)

// shareStrings makes the rows of a whole state read by load hold one
// string where they hold equal ones: a target's or member's provider slug
// is its provider's, a target's upstream model its route's model when
// they are equal, and a route's strategy, a target's upstream model and a
// provider's kind, base URL and metadata source one string per distinct
// value. The driver returns a new string for every column of every row;
// the snapshot keeps these rows for as long as they route (issue 21: at
// 100,000 routes a copy per row is megabytes). Providers are in order of
// id, as load reads them.
func shareStrings(st *store.State) {
	in := map[string]string{}
	share := func(s string) string {
		if v, ok := in[s]; ok {
			return v
		}
		in[s] = s
		return s
	}
	slug := func(id int64, s string) string {
		i, ok := slices.BinarySearchFunc(st.Providers, id, func(p store.Provider, id int64) int { return cmp.Compare(p.ID, id) })
		if ok && st.Providers[i].Slug == s {
			return st.Providers[i].Slug
		}
		return s
	}
	for i := range st.Providers {
		p := &st.Providers[i]
		p.Kind, p.BaseURL, p.MetadataSource = share(p.Kind), share(p.BaseURL), share(p.MetadataSource)
	}
	for i := range st.Routes {
		r := &st.Routes[i]
		r.Strategy = share(r.Strategy)
		for j := range r.Targets {
			t := &r.Targets[j]
			t.ProviderSlug = slug(t.ProviderID, t.ProviderSlug)
			if t.UpstreamModel == r.Model {
				t.UpstreamModel = r.Model
			} else {
				t.UpstreamModel = share(t.UpstreamModel)
			}
		}
	}
	for i := range st.Groups {
		g := &st.Groups[i]
		g.Strategy = share(g.Strategy)
		for j := range g.Members {
			m := &g.Members[j]
			m.ProviderSlug = slug(m.ProviderID, m.ProviderSlug)
		}
	}
}
