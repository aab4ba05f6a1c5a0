package sqlstore_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

type member struct {
	slug   string
	weight int
	mm     map[string]string
}

func members(g *store.Group) []member {
	var out []member
	for _, m := range g.Members {
		out = append(out, member{m.ProviderSlug, m.Weight, m.ModelMap})
	}
	return out
}

func TestGroups(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		a := mustProvider(t, s, o.ID, "vllm-msk-1")
		b := mustProvider(t, s, o.ID, "vllm-msk-2")
		c := mustProvider(t, s, o.ID, "vllm-nsk-1")
		g := &store.Group{OrgID: o.ID, Slug: "vllm-cluster", Name: "vLLM cluster", Strategy: "weighted", Members: []store.GroupMember{
			{ProviderID: b.ID, Weight: 2, ModelMap: map[string]string{"qwen3": "Qwen/Qwen3-8B"}},
			{ProviderID: a.ID, Weight: 1},
		}}
		if err := s.CreateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
		if g.ID == 0 || g.CreatedAt.IsZero() || !g.CreatedAt.Equal(g.UpdatedAt) {
			t.Fatalf("create did not fill id and timestamps: %+v", g)
		}
		got, err := s.GetGroup(ctx, o.ID, "vllm-cluster")
		if err != nil {
			t.Fatal(err)
		}
		// Members keep their order; an absent model map reads back empty.
		want := []member{{"vllm-msk-2", 2, map[string]string{"qwen3": "Qwen/Qwen3-8B"}}, {"vllm-msk-1", 1, map[string]string{}}}
		if got.Name != "vLLM cluster" || got.Strategy != "weighted" || !got.CreatedAt.Equal(g.CreatedAt) ||
			!reflect.DeepEqual(members(got), want) || got.Members[0].ProviderID != b.ID {
			t.Fatalf("get group: %+v, members %v", got, members(got))
		}
		if _, err := s.GetGroup(ctx, o.ID, "vllm-msk-1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a provider slug is not a group: %v", err)
		}
		// A provider may be in several groups; a group holds it once.
		all := &store.Group{OrgID: o.ID, Slug: "vllm-all", Name: "all", Strategy: "round_robin",
			Members: []store.GroupMember{{ProviderID: a.ID, Weight: 1}, {ProviderID: b.ID, Weight: 1}, {ProviderID: c.ID, Weight: 1}}}
		if err := s.CreateGroup(ctx, all); err != nil {
			t.Fatalf("overlapping group: %v", err)
		}
		var ce *store.ConflictError
		dup := &store.Group{OrgID: o.ID, Slug: "dup", Name: "dup", Strategy: "weighted",
			Members: []store.GroupMember{{ProviderID: a.ID, Weight: 1}, {ProviderID: a.ID, Weight: 1}}}
		if err := s.CreateGroup(ctx, dup); !errors.As(err, &ce) {
			t.Fatalf("same provider twice: %v", err)
		}
		if taken, _ := s.SlugTaken(ctx, o.ID, "dup"); taken {
			t.Fatal("a failed create kept its slug claim")
		}
		// A member of another org is refused, whatever the caller did.
		other := mustOrg(t, s, "other")
		foreign := mustProvider(t, s, other.ID, "foreign")
		cross := &store.Group{OrgID: o.ID, Slug: "cross", Name: "cross", Strategy: "weighted",
			Members: []store.GroupMember{{ProviderID: foreign.ID, Weight: 1}}}
		if err := s.CreateGroup(ctx, cross); err == nil {
			t.Fatal("a group took a provider of another org")
		}
		gs, err := s.ListGroups(ctx, o.ID, store.Page{})
		if err != nil || len(gs) != 2 || gs[0].Slug != "vllm-cluster" || len(gs[0].Members) != 2 || len(gs[1].Members) != 3 {
			t.Fatalf("list: %+v %v", gs, err)
		}
		if gs, err := s.ListGroups(ctx, o.ID, store.Page{Limit: 1, After: gs[0].ID}); err != nil || len(gs) != 1 || gs[0].Slug != "vllm-all" {
			t.Fatalf("second page: %+v %v", gs, err)
		}
		if gs, err := s.ListGroups(ctx, other.ID, store.Page{}); err != nil || len(gs) != 0 {
			t.Fatalf("groups belong to their org: %+v %v", gs, err)
		}

		// Update replaces the members and moves the slug claim.
		got.Slug, got.Name, got.Strategy = "vllm-msk", "Moscow", "least_busy"
		got.Members = []store.GroupMember{{ProviderID: c.ID, Weight: 7, ModelMap: map[string]string{"llama": "meta/llama-4"}}}
		before := got.UpdatedAt
		if err := s.UpdateGroup(ctx, got); err != nil {
			t.Fatal(err)
		}
		if got.UpdatedAt.Before(before) {
			t.Fatalf("updated_at went back: %v -> %v", before, got.UpdatedAt)
		}
		if taken, _ := s.SlugTaken(ctx, o.ID, "vllm-cluster"); taken {
			t.Fatal("old group slug still claimed")
		}
		if _, err := s.GetGroup(ctx, o.ID, "vllm-cluster"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("old slug still finds the group: %v", err)
		}
		back, err := s.GetGroup(ctx, o.ID, "vllm-msk")
		if err != nil || back.ID != g.ID || back.Name != "Moscow" || back.Strategy != "least_busy" ||
			!reflect.DeepEqual(members(back), []member{{"vllm-nsk-1", 7, map[string]string{"llama": "meta/llama-4"}}}) {
			t.Fatalf("after update: %+v %v", back, err)
		}
		// Moving onto a claimed slug (a provider's) fails and changes nothing.
		back.Slug = "vllm-msk-1"
		back.Members = nil
		if err := s.UpdateGroup(ctx, back); !errors.As(err, &ce) || ce.What != "slug" {
			t.Fatalf("move onto a provider slug: %v", err)
		}
		if again, err := s.GetGroup(ctx, o.ID, "vllm-msk"); err != nil || len(again.Members) != 1 {
			t.Fatalf("failed update changed the group: %+v %v", again, err)
		}
		if err := s.UpdateGroup(ctx, &store.Group{ID: 999999, Slug: "x", Name: "x", Strategy: "weighted"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("update missing group: %v", err)
		}

		// An org with groups is not deleted.
		var in *store.InUseError
		if err := s.DeleteOrg(ctx, o.ID); !errors.As(err, &in) {
			t.Fatalf("delete org with groups: %v", err)
		}
		// Delete removes the group and frees the slug.
		if _, err := s.PurgeGroup(ctx, g.ID, false); err != nil {
			t.Fatal(err)
		}
		if taken, _ := s.SlugTaken(ctx, o.ID, "vllm-msk"); taken {
			t.Fatal("delete kept the slug")
		}
		if _, err := s.PurgeGroup(ctx, g.ID, false); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		mustProvider(t, s, o.ID, "vllm-msk") // the freed slug is reusable by either kind
	})
}

// TestGroupSlugNamespace: providers and groups share one slug namespace per
// org, both ways.
func TestGroupSlugNamespace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		p := mustProvider(t, s, o.ID, "vllm")
		var ce *store.ConflictError
		g := &store.Group{OrgID: o.ID, Slug: "vllm", Name: "vllm", Strategy: "weighted", Members: []store.GroupMember{{ProviderID: p.ID, Weight: 1}}}
		if err := s.CreateGroup(ctx, g); !errors.As(err, &ce) || ce.What != "slug" {
			t.Fatalf("group on a provider slug: %v", err)
		}
		// A soft-deleted provider keeps its slug from groups too.
		q := mustProvider(t, s, o.ID, "old")
		if err := s.SoftDeleteProvider(ctx, q.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		g.Slug = "old"
		if err := s.CreateGroup(ctx, g); !errors.As(err, &ce) || ce.What != "slug" {
			t.Fatalf("group on a soft-deleted provider's slug: %v", err)
		}
		g.Slug = "cluster"
		if err := s.CreateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
		if taken, _ := s.SlugTaken(ctx, o.ID, "cluster"); !taken {
			t.Fatal("a group slug is not claimed")
		}
		dup := &store.Provider{OrgID: o.ID, Slug: "cluster", Name: "x", Kind: "vllm", BaseURL: "http://x", MetadataSource: "configured"}
		if err := s.CreateProvider(ctx, dup); !errors.As(err, &ce) || ce.What != "slug" {
			t.Fatalf("provider on a group slug: %v", err)
		}
		p.Slug = "cluster"
		if err := s.UpdateProvider(ctx, p); !errors.As(err, &ce) || ce.What != "slug" {
			t.Fatalf("provider renamed onto a group slug: %v", err)
		}
		// The same slug in another org is fine.
		o2 := mustOrg(t, s, "other")
		p2 := mustProvider(t, s, o2.ID, "vllm")
		if err := s.CreateGroup(ctx, &store.Group{OrgID: o2.ID, Slug: "cluster", Name: "c", Strategy: "weighted",
			Members: []store.GroupMember{{ProviderID: p2.ID, Weight: 1}}}); err != nil {
			t.Fatalf("same group slug in another org: %v", err)
		}
	})
}

func TestConcurrentGroupCreates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		p := mustProvider(t, s, o.ID, "vllm")
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			ok, conf int
		)
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if i%4 == 0 { // a provider racing for the same slug
					err = s.CreateProvider(context.Background(), &store.Provider{OrgID: o.ID, Slug: "race", Name: "race",
						Kind: "vllm", BaseURL: "http://x", MetadataSource: "configured"})
				} else {
					err = s.CreateGroup(context.Background(), &store.Group{OrgID: o.ID, Slug: "race", Name: "race", Strategy: "weighted",
						Members: []store.GroupMember{{ProviderID: p.ID, Weight: 1}}})
				}
				var ce *store.ConflictError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.As(err, &ce) && ce.What == "slug":
					conf++
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}()
		}
		wg.Wait()
		if ok != 1 || conf != 15 {
			t.Fatalf("concurrent claims: %d won, %d conflicts", ok, conf)
		}
	})
}

func TestLoadGroupsAndPurge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		a := mustProvider(t, s, o.ID, "a", "ka")
		b := mustProvider(t, s, o.ID, "b", "kb")
		g := &store.Group{OrgID: o.ID, Slug: "fleet", Name: "Fleet", Strategy: "weighted", Members: []store.GroupMember{
			{ProviderID: a.ID, Weight: 3, ModelMap: map[string]string{"qwen3": "Qwen/Qwen3-8B"}}, {ProviderID: b.ID, Weight: 1}}}
		if err := s.CreateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
		// Soft delete of a member is allowed and keeps the membership: the
		// snapshot decides what routes.
		if err := s.SoftDeleteProvider(ctx, b.ID, time.Now()); err != nil {
			t.Fatalf("soft delete of a member: %v", err)
		}
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Groups) != 1 {
			t.Fatalf("load: %d groups", len(st.Groups))
		}
		lg := st.Groups[0]
		want := []member{{"a", 3, map[string]string{"qwen3": "Qwen/Qwen3-8B"}}, {"b", 1, map[string]string{}}}
		if lg.ID != g.ID || lg.OrgID != o.ID || lg.Slug != "fleet" || lg.Name != "Fleet" || lg.Strategy != "weighted" ||
			!reflect.DeepEqual(members(&lg), want) || lg.Members[1].ProviderID != b.ID {
			t.Fatalf("loaded group: %+v members %v", lg, members(&lg))
		}
		// Purge is refused while the provider is a member, soft-deleted or not.
		var in *store.InUseError
		for _, id := range []int64{a.ID, b.ID} {
			if _, err := s.PurgeProvider(ctx, id, false); !errors.As(err, &in) || in.What != "group members" {
				t.Fatalf("purge of a member: %v", err)
			}
		}
		if taken, _ := s.SlugTaken(ctx, o.ID, "b"); !taken {
			t.Fatal("refused purge freed the slug")
		}
		g.Members = g.Members[:1]
		if err := s.UpdateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PurgeProvider(ctx, b.ID, false); err != nil {
			t.Fatalf("purge after leaving the group: %v", err)
		}
		if _, err := s.PurgeGroup(ctx, g.ID, false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PurgeProvider(ctx, a.ID, false); err != nil {
			t.Fatalf("purge after the group is gone: %v", err)
		}
		st, err = s.Load(ctx)
		if err != nil || len(st.Groups) != 0 || len(st.Providers) != 0 {
			t.Fatalf("load after cleanup: %+v %v", st, err)
		}
	})
}
