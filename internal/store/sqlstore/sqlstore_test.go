package sqlstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

func mustOrg(t *testing.T, s store.Store, name string) *store.Org {
	t.Helper()
	o := &store.Org{Name: name}
	if err := s.CreateOrg(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	return o
}

func mustProject(t *testing.T, s store.Store, org int64, name string) *store.Project {
	t.Helper()
	p := &store.Project{OrgID: org, Name: name}
	if err := s.CreateProject(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustProvider(t *testing.T, s store.Store, org int64, slug string, keys ...string) *store.Provider {
	t.Helper()
	p := &store.Provider{OrgID: org, Slug: slug, Name: slug, Kind: "vllm", BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured"}
	for _, k := range keys {
		p.Keys = append(p.Keys, store.ProviderKey{Secret: secret.New(k), Weight: 1})
	}
	if err := s.CreateProvider(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOrgsAndProjects(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		var ce *store.ConflictError
		if err := s.CreateOrg(ctx, &store.Org{Name: "acme"}); !errors.As(err, &ce) || ce.What != "org name" {
			t.Fatalf("duplicate org: %v", err)
		}
		got, err := s.GetOrg(ctx, "acme")
		if err != nil || got.ID != o.ID || !got.CreatedAt.Equal(o.CreatedAt) {
			t.Fatalf("get org: %+v %v (want %+v)", got, err, o)
		}
		if _, err := s.GetOrg(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("missing org: %v", err)
		}
		p := mustProject(t, s, o.ID, "default")
		if err := s.CreateProject(ctx, &store.Project{OrgID: o.ID, Name: "default"}); !errors.As(err, &ce) {
			t.Fatalf("duplicate project: %v", err)
		}
		// Same project name in another org is fine.
		o2 := mustOrg(t, s, "other")
		mustProject(t, s, o2.ID, "default")

		var in *store.InUseError
		if err := s.DeleteOrg(ctx, o.ID); !errors.As(err, &in) {
			t.Fatalf("delete non-empty org: %v", err)
		}
		p.Description = "renamed"
		p.Name = "main"
		if err := s.UpdateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetProject(ctx, o.ID, "main"); err != nil || got.Description != "renamed" {
			t.Fatalf("updated project: %+v %v", got, err)
		}
		if err := s.DeleteProject(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteOrg(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteOrg(ctx, o.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
	})
}

func TestPagination(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			mustOrg(t, s, n)
		}
		var names []string
		page := store.Page{Limit: 2}
		for {
			os, err := s.ListOrgs(ctx, page)
			if err != nil {
				t.Fatal(err)
			}
			if len(os) == 0 {
				break
			}
			for _, o := range os {
				names = append(names, o.Name)
			}
			page.After = os[len(os)-1].ID
		}
		if strings.Join(names, ",") != "a,b,c,d,e" {
			t.Fatalf("pages: %v", names)
		}
	})
}

func TestProvidersAndSlugs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		p := mustProvider(t, s, o.ID, "vllm", "k1", "k2")
		if len(p.Keys) != 2 || p.Keys[0].ID == 0 || p.Keys[0].ProviderID != p.ID {
			t.Fatalf("keys not filled: %+v", p.Keys)
		}
		var ce *store.ConflictError
		dup := &store.Provider{OrgID: o.ID, Slug: "vllm", Name: "x", Kind: "vllm", BaseURL: "http://x", MetadataSource: "configured"}
		if err := s.CreateProvider(ctx, dup); !errors.As(err, &ce) || ce.What != "slug" {
			t.Fatalf("duplicate slug: %v", err)
		}
		got, err := s.GetProvider(ctx, o.ID, "vllm")
		if err != nil || len(got.Keys) != 2 || !got.Keys[0].Secret.IsZero() {
			t.Fatalf("get provider: %+v %v (secrets must not be opened)", got, err)
		}
		// Rename the slug: the old one is freed, the new one claimed.
		got.Slug, got.Name = "vllm-msk", "vLLM Moscow"
		got.Settings.IdleTimeout = store.Duration(90 * time.Second)
		if err := s.UpdateProvider(ctx, got); err != nil {
			t.Fatal(err)
		}
		if taken, _ := s.SlugTaken(ctx, o.ID, "vllm"); taken {
			t.Fatal("old slug still claimed")
		}
		back, err := s.GetProvider(ctx, o.ID, "vllm-msk")
		if err != nil || back.Name != "vLLM Moscow" || back.Settings.IdleTimeout != store.Duration(90*time.Second) {
			t.Fatalf("after rename: %+v %v", back, err)
		}
		// Soft delete keeps the slug reserved; purge frees it.
		if err := s.SoftDeleteProvider(ctx, p.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if taken, _ := s.SlugTaken(ctx, o.ID, "vllm-msk"); !taken {
			t.Fatal("soft delete freed the slug")
		}
		if back, _ := s.GetProvider(ctx, o.ID, "vllm-msk"); back.DeletedAt == nil {
			t.Fatal("deleted_at not set")
		}
		if _, err := s.PurgeProvider(ctx, p.ID, false); err != nil {
			t.Fatal(err)
		}
		if taken, _ := s.SlugTaken(ctx, o.ID, "vllm-msk"); taken {
			t.Fatal("purge kept the slug")
		}
		again := mustProvider(t, s, o.ID, "vllm-msk")
		if again.ID == p.ID {
			t.Fatal("reuse after purge must be a new identity")
		}
		// Keys.
		k := &store.ProviderKey{ProviderID: again.ID, Secret: secret.New("k3"), Weight: 2}
		if err := s.AddProviderKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		if err := s.SetProviderKeyWeight(ctx, again.ID, k.ID, 7); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetProvider(ctx, o.ID, "vllm-msk"); err != nil || len(got.Keys) != 1 || got.Keys[0].Weight != 7 {
			t.Fatalf("keys after the weight change: %+v, %v", got, err)
		}
		if err := s.SetProviderKeyWeight(ctx, p.ID, k.ID, 3); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("weight of a key through another provider: %v", err)
		}
		if err := s.DeleteProviderKey(ctx, again.ID, k.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.SetProviderKeyWeight(ctx, again.ID, k.ID, 3); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("weight of a deleted key: %v", err)
		}
		if err := s.DeleteProviderKey(ctx, again.ID, k.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("delete key twice: %v", err)
		}
	})
}

func TestConcurrentSlugClaims(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			ok, conf int
		)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := &store.Provider{OrgID: o.ID, Slug: "race", Name: "race", Kind: "vllm", BaseURL: "http://x", MetadataSource: "configured"}
				err := s.CreateProvider(context.Background(), p)
				var ce *store.ConflictError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.As(err, &ce):
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

func TestRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pr := mustProject(t, s, o.ID, "default")
		a := mustProvider(t, s, o.ID, "a")
		b := mustProvider(t, s, o.ID, "b")
		r := &store.Route{ProjectID: pr.ID, Model: "org/qwen3", Strategy: "weighted",
			Policy:  store.Policy{MaxOutputTokens: 4096, Tools: "allow"},
			Targets: []store.Target{{ProviderID: a.ID, UpstreamModel: "Qwen/Qwen3-8B", Weight: 3}, {ProviderID: b.ID, Weight: 1}}}
		if err := s.CreateRoute(ctx, r); err != nil {
			t.Fatal(err)
		}
		var ce *store.ConflictError
		if err := s.CreateRoute(ctx, &store.Route{ProjectID: pr.ID, Model: "org/qwen3", Strategy: "weighted"}); !errors.As(err, &ce) || ce.What != "route model" {
			t.Fatalf("duplicate route: %v", err)
		}
		got, err := s.GetRoute(ctx, pr.ID, "org/qwen3")
		if err != nil || len(got.Targets) != 2 || got.Targets[0].ProviderSlug != "a" || got.Targets[0].Weight != 3 ||
			got.Targets[0].UpstreamModel != "Qwen/Qwen3-8B" || got.Policy.MaxOutputTokens != 4096 {
			t.Fatalf("get route: %+v %v", got, err)
		}
		var in *store.InUseError
		if _, err := s.PurgeProvider(ctx, b.ID, false); !errors.As(err, &in) {
			t.Fatalf("purge targeted provider: %v", err)
		}
		got.Targets = []store.Target{{ProviderID: b.ID, Weight: 5}}
		got.Strategy = "round_robin"
		if err := s.UpdateRoute(ctx, got); err != nil {
			t.Fatal(err)
		}
		rs, err := s.ListRoutes(ctx, pr.ID, store.Page{})
		if err != nil || len(rs) != 1 || len(rs[0].Targets) != 1 || rs[0].Targets[0].ProviderSlug != "b" || rs[0].Strategy != "round_robin" {
			t.Fatalf("list after update: %+v %v", rs, err)
		}
		if err := s.DeleteProject(ctx, pr.ID); !errors.As(err, &in) {
			t.Fatalf("delete project with routes: %v", err)
		}
		if err := s.DeleteRoute(ctx, got.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PurgeProvider(ctx, b.ID, false); err != nil {
			t.Fatalf("purge after route delete: %v", err)
		}
	})
}

func TestVirtualKeysAndAdminTokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pr := mustProject(t, s, o.ID, "default")
		tok, lookup := secret.Mint(secret.PrefixVirtualKey)
		exp := time.Now().Add(time.Hour)
		k := &store.VirtualKey{ProjectID: pr.ID, Name: "ci", Lookup: lookup, Hash: secret.HashOf(tok.Reveal()),
			Models: []string{"qwen3", "vllm/*"}, ExpiresAt: &exp}
		if err := s.CreateVirtualKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetVirtualKey(ctx, pr.ID, k.ID)
		if err != nil || !got.Hash.Equal(secret.HashOf(tok.Reveal())) || len(got.Models) != 2 ||
			got.ExpiresAt == nil || !got.ExpiresAt.Equal(*k.ExpiresAt) || got.RevokedAt != nil {
			t.Fatalf("get key: %+v %v", got, err)
		}
		if err := s.RevokeVirtualKey(ctx, k.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		first, _ := s.GetVirtualKey(ctx, pr.ID, k.ID)
		_ = s.RevokeVirtualKey(ctx, k.ID, time.Now().Add(time.Hour))
		second, _ := s.GetVirtualKey(ctx, pr.ID, k.ID)
		if first.RevokedAt == nil || !first.RevokedAt.Equal(*second.RevokedAt) {
			t.Fatalf("revocation time moved: %v -> %v", first.RevokedAt, second.RevokedAt)
		}
		if n, _ := s.CountAdminTokens(ctx); n != 0 {
			t.Fatalf("admin tokens: %d", n)
		}
		a := &store.AdminToken{Name: "bootstrap", Hash: secret.HashOf("ra-x")}
		if err := s.CreateAdminToken(ctx, a); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.CountAdminTokens(ctx); n != 1 {
			t.Fatalf("admin tokens: %d", n)
		}
	})
}

func TestSecretsEncryptedAtRest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		const plain = "sk-FAKE-upstream-key-123"
		sealer, _ := secret.NewSealer(secret.New("cc730ada935c795cd52b1d3e148df4bf4133c2b7392dd78d48764c8b28178f1d"))
		spec, dir := storetest.Spec(t, d)
		s, err := sqlstore.Open(ctx, spec, dir, sealer)
		if err != nil {
			t.Fatal(err)
		}
		o := mustOrg(t, s, "acme")
		mustProvider(t, s, o.ID, "p", plain)
		var raw string
		if err := s.SQL().QueryRowContext(ctx, `SELECT secret FROM provider_keys`).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(raw, plain) {
			t.Fatalf("plaintext at rest: %q", raw)
		}
		st, err := s.Load(ctx)
		if err != nil || st.Providers[0].Keys[0].Secret.Reveal() != plain {
			t.Fatalf("load: %v", err)
		}
		s.Close()
		// Without the master key the store refuses to load rather than
		// routing with garbage credentials.
		s2, err := sqlstore.Open(ctx, spec, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		if _, err := s2.Load(ctx); !errors.Is(err, secret.ErrNoMasterKey) {
			t.Fatalf("load without master key: %v", err)
		}
	})
}

func TestLoadAndReopen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		spec, dir := storetest.Spec(t, d)
		s, err := sqlstore.Open(ctx, spec, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		o := mustOrg(t, s, "acme")
		pr := mustProject(t, s, o.ID, "default")
		p := mustProvider(t, s, o.ID, "p", "k")
		if err := s.CreateRoute(ctx, &store.Route{ProjectID: pr.ID, Model: "m", Strategy: "weighted",
			Targets: []store.Target{{ProviderID: p.ID, Weight: 1}}}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		// Reopening runs migrations again (a no-op) and keeps everything.
		s, err = sqlstore.Open(ctx, spec, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Orgs) != 1 || len(st.Projects) != 1 || len(st.Providers) != 1 || len(st.Routes) != 1 ||
			st.Routes[0].Targets[0].ProviderSlug != "p" || st.Providers[0].Keys[0].Secret.Reveal() != "k" {
			t.Fatalf("state after reopen: %+v", st)
		}
	})
}

func TestOpenRejectsUnknownStore(t *testing.T) {
	_, err := sqlstore.Open(context.Background(), "mysql://root:hunter2@x/db", t.TempDir(), nil)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("unknown store: %v", err)
	}
}
