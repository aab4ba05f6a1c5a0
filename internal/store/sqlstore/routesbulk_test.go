package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// bulkRoutes is n routes of project over providers, each with 0 to 3
// targets and some with fallbacks, prices and limits: more than one
// statement's worth of routes and of targets.
func bulkRoutes(project int64, providers []*store.Provider, n int) []*store.Route {
	rs := make([]*store.Route, n)
	for i := range rs {
		r := &store.Route{ProjectID: project, Model: fmt.Sprintf("m-%05d", i), Strategy: "weighted", RPMLimit: i % 7}
		if i > 0 && i%5 == 0 {
			r.Fallbacks, r.ContextFallback = []string{fmt.Sprintf("m-%05d", i-1)}, fmt.Sprintf("m-%05d", i-2)
		}
		for j := range i % 4 {
			tg := store.Target{ProviderID: providers[(i+j)%len(providers)].ID, UpstreamModel: fmt.Sprintf("up-%d", j), Weight: 1 + j, Priority: j}
			if j == 1 {
				tg.Prices = &store.Prices{Input: 1000, Output: 2000}
				tg.ContextLimit = 4096
			}
			r.Targets = append(r.Targets, tg)
		}
		rs[i] = r
	}
	return rs
}

// CreateRoutes writes what CreateRoute writes, route by route, ids and
// times set; a model taken fails the whole call with CreateRoute's error
// and writes nothing, leaving a caller's transaction usable.
func TestCreateRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		bulk, one := mustProject(t, s, o.ID, "bulk"), mustProject(t, s, o.ID, "one")
		provs := []*store.Provider{mustProvider(t, s, o.ID, "a"), mustProvider(t, s, o.ID, "b"), mustProvider(t, s, o.ID, "c")}
		const n = 1201
		rs := bulkRoutes(bulk.ID, provs, n)
		if err := s.CreateRoutes(ctx, rs); err != nil {
			t.Fatal(err)
		}
		for _, r := range bulkRoutes(one.ID, provs, n) {
			if err := s.CreateRoute(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.ListRoutes(ctx, bulk.ID, store.Page{Limit: 2 * n})
		if err != nil || len(got) != n {
			t.Fatalf("listed %d routes: %v", len(got), err)
		}
		want, err := s.ListRoutes(ctx, one.ID, store.Page{Limit: 2 * n})
		if err != nil || len(want) != n {
			t.Fatalf("listed %d routes: %v", len(want), err)
		}
		for i := range got {
			r := rs[i]
			if r.ID == 0 || r.ID != got[i].ID || !r.CreatedAt.Equal(got[i].CreatedAt) || !r.UpdatedAt.Equal(got[i].UpdatedAt) {
				t.Fatalf("route %d: ids or times not set: %+v, stored %+v", i, r, got[i])
			}
			for j := range r.Targets {
				if r.Targets[j].ID == 0 || r.Targets[j].ID != got[i].Targets[j].ID {
					t.Fatalf("route %d target %d: id %d, stored %d", i, j, r.Targets[j].ID, got[i].Targets[j].ID)
				}
			}
			// Apart from ids, times and the project, what CreateRoute wrote.
			a, b := got[i], want[i]
			a.ID, a.CreatedAt, a.UpdatedAt, a.ProjectID = 0, b.CreatedAt, b.UpdatedAt, 0
			b.ID, b.ProjectID = 0, 0
			for _, ts := range [][]store.Target{a.Targets, b.Targets} {
				for j := range ts {
					ts[j].ID = 0
				}
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("route %d:\nbulk %+v\none  %+v", i, a, b)
			}
		}

		// A model taken, by a stored route or by another of the call,
		// fails it whole, inside a caller's transaction too.
		single := s.CreateRoute(ctx, &store.Route{ProjectID: bulk.ID, Model: "m-00003", Strategy: "weighted"})
		var ce *store.ConflictError
		if !errors.As(single, &ce) {
			t.Fatalf("CreateRoute of a taken model: %v", single)
		}
		for name, batch := range map[string][]*store.Route{
			"stored": {{ProjectID: bulk.ID, Model: "new-1", Strategy: "weighted"}, {ProjectID: bulk.ID, Model: "m-00003", Strategy: "weighted"}},
			"twice":  {{ProjectID: one.ID, Model: "new-2", Strategy: "weighted"}, {ProjectID: one.ID, Model: "new-2", Strategy: "weighted"}},
		} {
			err := s.Tx(ctx, func(tx store.Store) error {
				err := tx.(interface {
					CreateRoutes(context.Context, []*store.Route) error
				}).CreateRoutes(ctx, batch)
				if !errors.As(err, &ce) || err.Error() != single.Error() {
					t.Errorf("%s: %v, want %v", name, err, single)
				}
				// The transaction is still usable.
				return tx.CreateRoute(ctx, &store.Route{ProjectID: one.ID, Model: "after-" + name, Strategy: "weighted"})
			})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		for _, m := range []string{"new-1", "new-2"} {
			for _, p := range []int64{bulk.ID, one.ID} {
				if _, err := s.GetRoute(ctx, p, m); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("route %s of a failed call: %v", m, err)
				}
			}
		}
		if err := s.CreateRoutes(ctx, nil); err != nil {
			t.Fatalf("no routes: %v", err)
		}
	})
}
