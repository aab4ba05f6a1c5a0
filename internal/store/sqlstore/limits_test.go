package sqlstore_test

import (
	"context"
	"testing"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// TestRateLimitFields: projects and routes keep rpm_limit and tpm_limit
// through create, update, get, list and the snapshot's Load, on both stores.
func TestRateLimitFields(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pr := &store.Project{OrgID: o.ID, Name: "team", RPMLimit: 600, TPMLimit: 90000}
		if err := s.CreateProject(ctx, pr); err != nil {
			t.Fatal(err)
		}
		p := mustProvider(t, s, o.ID, "p")
		r := &store.Route{ProjectID: pr.ID, Model: "m", Strategy: "weighted", RPMLimit: 60, TPMLimit: 1000,
			Targets: []store.Target{{ProviderID: p.ID, Weight: 1}}}
		if err := s.CreateRoute(ctx, r); err != nil {
			t.Fatal(err)
		}
		gp, err := s.GetProject(ctx, o.ID, "team")
		if err != nil || gp.RPMLimit != 600 || gp.TPMLimit != 90000 {
			t.Fatalf("get project: %+v %v", gp, err)
		}
		gr, err := s.GetRoute(ctx, pr.ID, "m")
		if err != nil || gr.RPMLimit != 60 || gr.TPMLimit != 1000 {
			t.Fatalf("get route: %+v %v", gr, err)
		}
		gp.RPMLimit, gp.TPMLimit = 0, 5
		if err := s.UpdateProject(ctx, gp); err != nil {
			t.Fatal(err)
		}
		gr.RPMLimit, gr.TPMLimit = 7, 0
		if err := s.UpdateRoute(ctx, gr); err != nil {
			t.Fatal(err)
		}
		ps, err := s.ListProjects(ctx, o.ID, store.Page{})
		if err != nil || len(ps) != 1 || ps[0].RPMLimit != 0 || ps[0].TPMLimit != 5 {
			t.Fatalf("list projects: %+v %v", ps, err)
		}
		rs, err := s.ListRoutes(ctx, pr.ID, store.Page{})
		if err != nil || len(rs) != 1 || rs[0].RPMLimit != 7 || rs[0].TPMLimit != 0 {
			t.Fatalf("list routes: %+v %v", rs, err)
		}
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Projects) != 1 || st.Projects[0].TPMLimit != 5 || len(st.Routes) != 1 || st.Routes[0].RPMLimit != 7 {
			t.Fatalf("load: projects %+v routes %+v", st.Projects, st.Routes)
		}
	})
}
