package admin_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store/storetest"
)

// Issue 19: a declarative file may name as a fallback a route that comes
// later in it (routes are written after their fallbacks); re-applying it
// changes nothing, a changed list is written, and a file with a cycle is
// refused with fallback_cycle and writes nothing.
func TestApplyRouteFallbacks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newApplyEnv(t, d)
		ctx := context.Background()
		file := func(aFallbacks []string, cFallbacks []string) admin.Desired {
			d := oneProvider()
			d.Orgs[0].Projects = []admin.DesiredProject{{ProjectInput: admin.ProjectInput{Name: "web"}, Routes: []admin.RouteInput{
				{Model: "a", Fallbacks: aFallbacks, ContextFallback: "c", Targets: []admin.TargetInput{{Provider: "openai", Priority: 1}}},
				{Model: "b", Targets: []admin.TargetInput{{Provider: "openai"}}},
				{Model: "c", Fallbacks: cFallbacks, Targets: []admin.TargetInput{{Provider: "openai"}}},
			}}}
			return d
		}
		e.apply(t, file([]string{"b", "c"}, nil), admin.ApplyOptions{})
		a, err := e.svc.GetRoute(ctx, "acme", "web", "a")
		if err != nil || !reflect.DeepEqual(a.Fallbacks, []string{"b", "c"}) || a.ContextFallback != "c" || a.Targets[0].Priority != 1 {
			t.Fatalf("route a: %+v %v", a, err)
		}
		res := e.apply(t, file([]string{"b", "c"}, nil), admin.ApplyOptions{})
		routes := 0
		for _, c := range res.Changes {
			if c.Kind == admin.KindRoute {
				routes++
				if c.Action != admin.ActionUnchanged {
					t.Errorf("re-apply changed %s: %+v", c.Name, c)
				}
			}
		}
		if routes != 3 {
			t.Fatalf("re-apply reported %d routes", routes)
		}
		e.apply(t, file([]string{"c"}, nil), admin.ApplyOptions{})
		if a, _ = e.svc.GetRoute(ctx, "acme", "web", "a"); !reflect.DeepEqual(a.Fallbacks, []string{"c"}) {
			t.Fatalf("changed list: %v", a.Fallbacks)
		}
		_, err = e.svc.Apply(ctx, file([]string{"c"}, []string{"a"}), admin.ApplyOptions{})
		var ae *admin.Error
		if !errors.As(err, &ae) || ae.Code != admin.CodeFallbackCycle {
			t.Fatalf("a cycle: %v", err)
		}
		if c, _ := e.svc.GetRoute(ctx, "acme", "web", "c"); len(c.Fallbacks) != 0 {
			t.Fatalf("a refused apply wrote %v", c.Fallbacks)
		}
	})
}
