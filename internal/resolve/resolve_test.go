package resolve

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// fixture builds a snapshot with two orgs that both have a provider "vllm".
func fixture(extraRoutes, extraProviders int) *snapshot.Snapshot {
	st := &store.State{
		Orgs:     []store.Org{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}},
		Projects: []store.Project{{ID: 1, OrgID: 1, Name: "p"}, {ID: 2, OrgID: 2, Name: "p"}},
		Providers: []store.Provider{
			{ID: 1, OrgID: 1, Slug: "vllm"}, {ID: 2, OrgID: 1, Slug: "vllm-spb"},
			{ID: 3, OrgID: 2, Slug: "vllm"}, {ID: 4, OrgID: 1, Slug: "gone", DeletedAt: &time.Time{}},
		},
		Routes: []store.Route{
			{ID: 1, ProjectID: 1, Model: "qwen3", Targets: []store.Target{{ProviderID: 1, Weight: 1}}},
			{ID: 2, ProjectID: 1, Model: "vllm-spb/qwen3", Targets: []store.Target{{ProviderID: 1, Weight: 1}}},
		},
		Groups: []store.Group{{ID: 1, OrgID: 1, Slug: "cluster", Members: []store.GroupMember{
			{ProviderID: 1, Weight: 1, ModelMap: map[string]string{"qwen3": "Qwen/Qwen3-8B"}}, {ProviderID: 2, Weight: 2}, {ProviderID: 4, Weight: 1}}}},
	}
	for i := range extraProviders {
		st.Providers = append(st.Providers, store.Provider{ID: int64(100 + i), OrgID: 1, Slug: fmt.Sprintf("p%d", i)})
	}
	for i := range extraRoutes {
		st.Routes = append(st.Routes, store.Route{ID: int64(100 + i), ProjectID: 1, Model: fmt.Sprintf("route-%d", i),
			Targets: []store.Target{{ProviderID: 1, Weight: 1}}})
	}
	return snapshot.Build(st, time.Now())
}

func TestResolve(t *testing.T) {
	s := fixture(0, 0)
	pa := s.Org("a").Projects.At("p")
	pb := s.Org("b").Projects.At("p")
	for _, c := range []struct {
		name     string
		project  *snapshot.Project
		model    string
		kind     Kind
		provider int64
		right    string
	}{
		{"route", pa, "qwen3", KindRoute, 0, ""},
		{"route with slash beats provider", pa, "vllm-spb/qwen3", KindRoute, 0, ""},
		{"provider pin", pa, "vllm-spb/llama", KindProvider, 2, "llama"},
		{"first slash only", pa, "vllm/Qwen/Qwen3-8B", KindProvider, 1, "Qwen/Qwen3-8B"},
		{"group", pa, "cluster/qwen3", KindGroup, 0, "qwen3"},
		{"other org's same slug", pb, "vllm/qwen3", KindProvider, 3, "qwen3"},
		{"other org's group is invisible", pb, "cluster/qwen3", "", 0, ""},
		{"other org's route is invisible", pb, "qwen3", "", 0, ""},
		{"unknown slug", pa, "unknown/qwen3", "", 0, ""},
		{"soft-deleted provider", pa, "gone/qwen3", "", 0, ""},
		{"empty right", pa, "vllm/", "", 0, ""},
		{"empty left", pa, "/qwen3", "", 0, ""},
		{"no slash", pa, "llama", "", 0, ""},
		{"empty", pa, "", "", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, ok := Resolve(c.project, c.model)
			if ok != (c.kind != "") || a.Kind != c.kind {
				t.Fatalf("Resolve(%q) = %+v, %v", c.model, a, ok)
			}
			if c.provider != 0 && (a.Provider == nil || a.Provider.ID != c.provider) {
				t.Fatalf("provider %+v, want id %d", a.Provider, c.provider)
			}
			if a.Model != c.right {
				t.Fatalf("right part %q, want %q", a.Model, c.right)
			}
		})
	}
	g, _ := Resolve(pa, "cluster/qwen3")
	if len(g.Group.Members) != 2 { // the soft-deleted member is out of rotation
		t.Fatalf("members: %d", len(g.Group.Members))
	}
	if MemberModel(g.Group.Members[0], "qwen3") != "Qwen/Qwen3-8B" || MemberModel(g.Group.Members[1], "qwen3") != "qwen3" {
		t.Fatal("model_map / passthrough")
	}
}

func FuzzResolve(f *testing.F) {
	s := fixture(0, 0)
	pa := s.Org("a").Projects.At("p")
	for _, seed := range []string{"qwen3", "vllm/x", "cluster/a/b", "/", "//", "vllm-spb/qwen3", "a/"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, model string) {
		a, ok := Resolve(pa, model)
		if !ok {
			return
		}
		switch a.Kind {
		case KindRoute:
			if a.Route.Model != model {
				t.Fatalf("route %q for %q", a.Route.Model, model)
			}
		case KindProvider, KindGroup:
			if pa.Routes.At(model) != nil {
				t.Fatalf("%q is a route but resolved as %s", model, a.Kind)
			}
			left, right, _ := strings.Cut(model, "/")
			if right != a.Model || right == "" {
				t.Fatalf("right part %q for %q", a.Model, model)
			}
			if a.Kind == KindProvider && a.Provider.Slug != left || a.Kind == KindGroup && a.Group.Slug != left {
				t.Fatalf("wrong slug for %q", model)
			}
		}
	})
}

// BenchmarkResolve shows that resolution does not grow with the catalog:
// the same three lookups against 10 to 100,000 routes and slugs.
func BenchmarkResolve(b *testing.B) {
	for _, n := range []int{10, 1000, 100_000} {
		s := fixture(n, n)
		p := s.Org("a").Projects.At("p")
		for _, c := range []struct{ name, model string }{
			{"route", fmt.Sprintf("route-%d", n/2)},
			{"provider", fmt.Sprintf("p%d/qwen3", n/2)},
			{"group", "cluster/qwen3"},
		} {
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, ok := Resolve(p, c.model); !ok {
						b.Fatal("not found")
					}
				}
			})
		}
	}
}
