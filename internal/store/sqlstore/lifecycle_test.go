package sqlstore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

func mustKey(t *testing.T, s store.Store, project int64, name string, models ...string) *store.VirtualKey {
	t.Helper()
	tok, lookup := secret.Mint(secret.PrefixVirtualKey)
	k := &store.VirtualKey{ProjectID: project, Name: name, Lookup: lookup, Hash: secret.HashOf(tok.Reveal()), Models: models}
	if err := s.CreateVirtualKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestGroupSoftDeleteKeepsSlug: design 000 §3 ("Prefer soft-delete … a
// freed slug is not silently re-pointed") holds for groups as for
// providers: a soft-deleted group keeps its slug claim and row (out of
// routing), and only a purge frees the slug.
func TestGroupSoftDeleteKeepsSlug(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		p := mustProvider(t, s, o.ID, "vllm")
		g := &store.Group{OrgID: o.ID, Slug: "cluster", Name: "cluster", Strategy: "weighted", Members: []store.GroupMember{{ProviderID: p.ID, Weight: 1}}}
		if err := s.CreateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
		if h, err := s.SlugHolder(ctx, o.ID, "cluster"); err != nil || h != (store.SlugHolder{Kind: "group"}) {
			t.Fatalf("holder of a live group's slug: %+v %v", h, err)
		}
		at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
		if err := s.SoftDeleteGroup(ctx, g.ID, at); err != nil {
			t.Fatal(err)
		}
		if err := s.SoftDeleteGroup(ctx, g.ID, at); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("soft delete twice: %v", err)
		}
		back, err := s.GetGroup(ctx, o.ID, "cluster")
		if err != nil || back.DeletedAt == nil || !back.DeletedAt.Equal(at) || len(back.Members) != 1 {
			t.Fatalf("deleted group: %+v %v", back, err)
		}
		if h, err := s.SlugHolder(ctx, o.ID, "cluster"); err != nil || h != (store.SlugHolder{Kind: "group", Deleted: true}) {
			t.Fatalf("holder of a deleted group's slug: %+v %v", h, err)
		}
		var ce *store.ConflictError
		if err := s.CreateProvider(ctx, &store.Provider{OrgID: o.ID, Slug: "cluster", Name: "x", Kind: "vllm", BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured"}); !errors.As(err, &ce) || ce.What != "slug" {
			t.Fatalf("a provider on a deleted group's slug: %v", err)
		}
		st, err := s.Load(ctx)
		if err != nil || len(st.Groups) != 1 || st.Groups[0].DeletedAt == nil {
			t.Fatalf("load keeps the deleted group, marked: %+v %v", st, err)
		}
		// Its membership no longer holds the provider: the provider can be
		// purged, and the membership goes with it.
		if _, err := s.PurgeProvider(ctx, p.ID, false); err != nil {
			t.Fatalf("purge a member of a deleted group only: %v", err)
		}
		if back, _ := s.GetGroup(ctx, o.ID, "cluster"); len(back.Members) != 0 {
			t.Fatalf("membership left after the purge: %+v", back.Members)
		}
		if _, err := s.PurgeGroup(ctx, g.ID, false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SlugHolder(ctx, o.ID, "cluster"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("holder after purge: %v", err)
		}
		if _, err := s.PurgeGroup(ctx, g.ID, false); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("purge twice: %v", err)
		}
		mustProvider(t, s, o.ID, "cluster") // the purged slug is free again
	})
}

// TestPurgeAllowlistRule: design 000 §3 — a purge frees a slug, so a key
// allowed "slug/*" would quietly authorise whatever claims it next. A
// purge of a provider or group named in live keys' allowlists is refused,
// listing those keys (and changing nothing); force removes the entries in
// the purge's transaction, revoking a key left with none (an empty list
// would allow every model). Other orgs' and revoked keys do not count.
func TestPurgeAllowlistRule(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		web, batch := mustProject(t, s, o.ID, "web"), mustProject(t, s, o.ID, "batch")
		p := mustProvider(t, s, o.ID, "vllm")
		mustProvider(t, s, o.ID, "vllm-2")
		if err := s.SoftDeleteProvider(ctx, p.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		wide := mustKey(t, s, web.ID, "wide", "vllm/*", "gpt-4o", "vllm-2/*")
		only := mustKey(t, s, batch.ID, "only", "vllm/qwen3")
		// Not references: another slug with the same prefix, a route name,
		// a revoked key, another org's key.
		mustKey(t, s, web.ID, "near", "vllm-2/qwen3", "vllm", "VLLM/qwen3")
		gone := mustKey(t, s, web.ID, "gone", "vllm/*")
		if err := s.RevokeVirtualKey(ctx, gone.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		o2 := mustOrg(t, s, "other")
		other := mustKey(t, s, mustProject(t, s, o2.ID, "p").ID, "theirs", "vllm/*")

		var al *store.AllowlistError
		_, err := s.PurgeProvider(ctx, p.ID, false)
		if !errors.As(err, &al) || al.Slug != "vllm" {
			t.Fatalf("purge named in allowlists: %v", err)
		}
		want := []store.AllowlistRef{
			{KeyID: wide.ID, Name: "wide", Project: "web", Entries: []string{"vllm/*"}},
			{KeyID: only.ID, Name: "only", Project: "batch", Entries: []string{"vllm/qwen3"}},
		}
		if !reflect.DeepEqual(al.Keys, want) {
			t.Fatalf("refusal lists %+v, want %+v", al.Keys, want)
		}
		if h, err := s.SlugHolder(ctx, o.ID, "vllm"); err != nil || !h.Deleted {
			t.Fatalf("a refused purge freed the slug: %+v %v", h, err)
		}

		refs, err := s.PurgeProvider(ctx, p.ID, true)
		if err != nil {
			t.Fatalf("forced purge: %v", err)
		}
		want[1].Revoked = true
		if !reflect.DeepEqual(refs, want) {
			t.Fatalf("forced purge changed %+v, want %+v", refs, want)
		}
		if taken, _ := s.SlugTaken(ctx, o.ID, "vllm"); taken {
			t.Fatal("forced purge kept the slug")
		}
		if k, _ := s.GetVirtualKey(ctx, web.ID, wide.ID); !reflect.DeepEqual(k.Models, []string{"gpt-4o", "vllm-2/*"}) || k.RevokedAt != nil {
			t.Fatalf("wide key after the purge: %+v", k)
		}
		if k, _ := s.GetVirtualKey(ctx, batch.ID, only.ID); k.RevokedAt == nil {
			t.Fatalf("a key left with no entry stays live: %+v", k)
		}
		if k, _ := s.GetVirtualKey(ctx, other.ProjectID, other.ID); !reflect.DeepEqual(k.Models, []string{"vllm/*"}) || k.RevokedAt != nil {
			t.Fatalf("another org's key changed: %+v", k)
		}

		// The same rule for a group.
		q := mustProvider(t, s, o.ID, "member")
		g := &store.Group{OrgID: o.ID, Slug: "cluster", Name: "cluster", Strategy: "weighted", Members: []store.GroupMember{{ProviderID: q.ID, Weight: 1}}}
		if err := s.CreateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
		ck := mustKey(t, s, web.ID, "cluster-user", "cluster/*", "cluster/qwen3", "gpt-4o")
		if _, err := s.PurgeGroup(ctx, g.ID, false); !errors.As(err, &al) || len(al.Keys) != 1 || al.Keys[0].KeyID != ck.ID ||
			!reflect.DeepEqual(al.Keys[0].Entries, []string{"cluster/*", "cluster/qwen3"}) {
			t.Fatalf("group purge named in an allowlist: %v", err)
		}
		if _, err := s.GetGroup(ctx, o.ID, "cluster"); err != nil {
			t.Fatalf("a refused group purge removed it: %v", err)
		}
		if refs, err := s.PurgeGroup(ctx, g.ID, true); err != nil || len(refs) != 1 || refs[0].Revoked {
			t.Fatalf("forced group purge: %+v %v", refs, err)
		}
		if k, _ := s.GetVirtualKey(ctx, web.ID, ck.ID); !reflect.DeepEqual(k.Models, []string{"gpt-4o"}) {
			t.Fatalf("cluster key after the purge: %+v", k)
		}
	})
}
