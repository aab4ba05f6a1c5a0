package sqlstore_test

import (
	"context"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// Providers (in their settings) and groups (in a column) keep a policy like
// routes do; Load carries them to the snapshot. A fleet host's provider
// inherits its route's policy by reference, and a re-registration keeps
// what an operator set on the host's provider.
func TestPolicyOnProvidersAndGroups(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		strict := store.Policy{MaxOutputTokens: 256, Tools: "deny", Media: "deny", MaxConcurrency: 4}
		p := &store.Provider{OrgID: o.ID, Slug: "p", Name: "p", Kind: "vllm", BaseURL: "http://127.0.0.1:1/v1",
			MetadataSource: "configured", Settings: store.ProviderSettings{Policy: strict}}
		if err := s.CreateProvider(ctx, p); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetProvider(ctx, o.ID, "p")
		if err != nil || got.Settings.Policy != strict {
			t.Fatalf("provider policy after create: %+v %v", got, err)
		}
		got.Settings.Policy = store.Policy{Tools: "allow", MaxOutputTokens: 10}
		if err := s.UpdateProvider(ctx, got); err != nil {
			t.Fatal(err)
		}
		if again, _ := s.GetProvider(ctx, o.ID, "p"); again.Settings.Policy != (store.Policy{Tools: "allow", MaxOutputTokens: 10}) {
			t.Fatalf("provider policy after update: %+v", again.Settings.Policy)
		}

		g := &store.Group{OrgID: o.ID, Slug: "g", Name: "g", Strategy: "weighted", Policy: strict,
			Members: []store.GroupMember{{ProviderID: p.ID, Weight: 1}}}
		if err := s.CreateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
		gg, err := s.GetGroup(ctx, o.ID, "g")
		if err != nil || gg.Policy != strict {
			t.Fatalf("group policy after create: %+v %v", gg, err)
		}
		gg.Policy = store.Policy{Media: "deny"}
		if err := s.UpdateGroup(ctx, gg); err != nil {
			t.Fatal(err)
		}
		list, err := s.ListGroups(ctx, o.ID, store.Page{Limit: 10})
		if err != nil || len(list) != 1 || list[0].Policy != (store.Policy{Media: "deny"}) {
			t.Fatalf("group policy after update: %+v %v", list, err)
		}
		st, err := s.Load(ctx)
		if err != nil || len(st.Groups) != 1 || st.Groups[0].Policy != (store.Policy{Media: "deny"}) ||
			len(st.Providers) != 1 || st.Providers[0].Settings.Policy.MaxOutputTokens != 10 {
			t.Fatalf("load: %+v %v", st, err)
		}

		// Fleet: the host's provider points at its route's policy.
		pj := mustProject(t, s, o.ID, "fleet")
		h := &store.Host{OrgID: o.ID, ProjectID: pj.ID, IP: "10.0.0.9", Port: 8000, ModelName: "qwen3",
			APIKey: secret.New("rh-x_y"), Recipe: testRecipe("Qwen/Qwen3-8B")}
		if err := s.CreateHost(ctx, h, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterHost(ctx, h.ID, store.HostRegistration{ServedModel: "Qwen/Qwen3-8B"}); err != nil {
			t.Fatal(err)
		}
		route, err := s.GetRoute(ctx, pj.ID, "qwen3")
		if err != nil {
			t.Fatal(err)
		}
		hh, _ := s.GetHost(ctx, o.ID, h.ID)
		hp, err := s.GetProvider(ctx, o.ID, hh.ProviderSlug)
		if err != nil || hp.Settings.PolicyRoute != route.ID {
			t.Fatalf("host provider settings: %+v (route %d) %v", hp.Settings, route.ID, err)
		}
		hp.Settings.Policy = store.Policy{MaxConcurrency: 2}
		if err := s.UpdateProvider(ctx, hp); err != nil {
			t.Fatal(err)
		}
		if err := s.DeregisterHost(ctx, h.ID, store.HostDown); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterHost(ctx, h.ID, store.HostRegistration{ServedModel: "Qwen/Qwen3-8B"}); err != nil {
			t.Fatal(err)
		}
		hp, _ = s.GetProvider(ctx, o.ID, hh.ProviderSlug)
		if hp.Settings.PolicyRoute != route.ID || hp.Settings.Policy.MaxConcurrency != 2 {
			t.Fatalf("re-registered host provider settings: %+v", hp.Settings)
		}
	})
}
