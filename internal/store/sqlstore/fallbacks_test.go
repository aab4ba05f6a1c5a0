package sqlstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

// TestRouteFallbackFields: target priorities, a route's fallbacks and its
// context fallback, and a usage record's tier and fallback round-trip on
// both dialects, through create, update, list and Load.
func TestRouteFallbackFields(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pr := mustProject(t, s, o.ID, "default")
		a := mustProvider(t, s, o.ID, "a")
		b := mustProvider(t, s, o.ID, "b")
		for _, m := range []string{"cloud", "big"} {
			if err := s.CreateRoute(ctx, &store.Route{ProjectID: pr.ID, Model: m, Strategy: "weighted",
				Targets: []store.Target{{ProviderID: b.ID, Weight: 1}}}); err != nil {
				t.Fatal(err)
			}
		}
		r := &store.Route{ProjectID: pr.ID, Model: "qwen3", Strategy: "weighted",
			Fallbacks: []string{"cloud", "big"}, ContextFallback: "big",
			Targets: []store.Target{{ProviderID: a.ID, Weight: 1}, {ProviderID: b.ID, Weight: 1, Priority: 2}}}
		if err := s.CreateRoute(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetRoute(ctx, pr.ID, "qwen3")
		if err != nil || !slices.Equal(got.Fallbacks, []string{"cloud", "big"}) || got.ContextFallback != "big" ||
			got.Targets[0].Priority != 0 || got.Targets[1].Priority != 2 {
			t.Fatalf("get route: %+v %v", got, err)
		}
		plain, err := s.GetRoute(ctx, pr.ID, "cloud")
		if err != nil || plain.Fallbacks != nil || plain.ContextFallback != "" {
			t.Fatalf("a route without fallbacks: %+v %v", plain, err)
		}
		got.Fallbacks, got.ContextFallback = []string{"big"}, ""
		got.Targets[1].Priority = 7
		if err := s.UpdateRoute(ctx, got); err != nil {
			t.Fatal(err)
		}
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var loaded *store.Route
		for i := range st.Routes {
			if st.Routes[i].Model == "qwen3" {
				loaded = &st.Routes[i]
			}
		}
		if loaded == nil || !slices.Equal(loaded.Fallbacks, []string{"big"}) || loaded.ContextFallback != "" || loaded.Targets[1].Priority != 7 {
			t.Fatalf("loaded route: %+v", loaded)
		}

		if err := s.InsertUsage(ctx, []store.UsageRecord{
			{OrgID: o.ID, ProjectID: pr.ID, AddressKind: "route", Address: "qwen3", Route: "qwen3", Status: 200, Tier: 2, Fallback: "cloud"},
			{OrgID: o.ID, ProjectID: pr.ID, AddressKind: "route", Address: "qwen3", Route: "qwen3", Status: 200},
		}); err != nil {
			t.Fatal(err)
		}
		us, err := s.ListUsage(ctx, store.UsageFilter{OrgID: o.ID}, store.Page{})
		if err != nil || len(us) != 2 || us[0].Tier != 2 || us[0].Fallback != "cloud" || us[1].Tier != 0 || us[1].Fallback != "" {
			t.Fatalf("usage: %+v %v", us, err)
		}
	})
}

// FallbackRoutes reads the project's routes that name a fallback or a
// context fallback, and those named, by id and without targets; no other
// route and no other project's. On SQLite the query uses the partial index
// routes_with_fallbacks, not a scan of the project's routes.
func TestFallbackRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pr := mustProject(t, s, o.ID, "default")
		other := mustProject(t, s, o.ID, "other")
		a := mustProvider(t, s, o.ID, "a")
		route := func(pj int64, model string, fallbacks []string, ctxFallback string) *store.Route {
			t.Helper()
			r := &store.Route{ProjectID: pj, Model: model, Strategy: "weighted", Fallbacks: fallbacks, ContextFallback: ctxFallback,
				Targets: []store.Target{{ProviderID: a.ID, Weight: 1}}}
			if err := s.CreateRoute(ctx, r); err != nil {
				t.Fatal(err)
			}
			return r
		}
		for _, m := range []string{"plain-1", "plain-2", "named"} {
			route(pr.ID, m, nil, "")
		}
		withList := route(pr.ID, "with-list", []string{"plain-1"}, "")
		withCtx := route(pr.ID, "with-context", nil, "plain-2")
		route(other.ID, "elsewhere", []string{"x"}, "")
		cleared := route(pr.ID, "cleared", []string{"plain-1"}, "")
		cleared.Fallbacks = nil
		if err := s.UpdateRoute(ctx, cleared); err != nil {
			t.Fatal(err)
		}
		models := func(rs []store.Route) []string {
			var out []string
			for _, r := range rs {
				if r.Targets != nil {
					t.Errorf("route %s read with its targets", r.Model)
				}
				out = append(out, r.Model)
			}
			return out
		}
		got, err := s.FallbackRoutes(ctx, pr.ID, nil)
		if want := []string{"with-list", "with-context"}; err != nil || !slices.Equal(models(got), want) {
			t.Fatalf("no names: %v %v, want %v", models(got), err, want)
		}
		if !slices.Equal(got[0].Fallbacks, withList.Fallbacks) || got[1].ContextFallback != withCtx.ContextFallback {
			t.Errorf("edges read: %+v", got)
		}
		got, err = s.FallbackRoutes(ctx, pr.ID, []string{"named", "with-list", "missing", "elsewhere"})
		if want := []string{"named", "with-list", "with-context"}; err != nil || !slices.Equal(models(got), want) {
			t.Fatalf("with names: %v %v, want %v (by id)", models(got), err, want)
		}
		if d != "sqlite" {
			return
		}
		rows, err := s.SQL().QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT id FROM routes WHERE `+sqlstore.WithFallbacks+` ORDER BY id`, pr.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		plan := ""
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan += detail + "\n"
		}
		if !strings.Contains(plan, "routes_with_fallbacks") {
			t.Errorf("the query does not use the partial index:\n%s", plan)
		}
	})
}
