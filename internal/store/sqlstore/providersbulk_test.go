package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// CreateProviders writes what CreateProvider writes, slug claims, keys
// (sealed, in their order) and all, ids and times set; a slug taken fails
// the whole call with CreateProvider's error and writes nothing, leaving a
// caller's transaction usable.
func TestCreateProviders(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		sealer, err := secret.NewSealer(secret.New("3f1c9a7e52d04b86a1e7c3d95b20f4e6817a2c5d9e0b3f6a4c8d1e7b2a5f9c03"))
		if err != nil {
			t.Fatal(err)
		}
		s := storetest.Open(t, d, sealer)
		o := mustOrg(t, s, "acme")
		const n = 1203 // more than two statements' worth of each table
		ps := make([]*store.Provider, n)
		for i := range ps {
			p := &store.Provider{OrgID: o.ID, Slug: fmt.Sprintf("p-%05d", i), Name: fmt.Sprintf("P %d", i), Kind: "vllm",
				BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured", ContextLimit: i, Models: []string{"m"}}
			for k := range i % 3 {
				p.Keys = append(p.Keys, store.ProviderKey{Secret: secret.New(fmt.Sprintf("sk-%d-%d", i, k)), Weight: 10*i + k, Ref: fmt.Sprintf("REF_%d", k)})
			}
			ps[i] = p
		}
		if err := s.CreateProviders(ctx, ps); err != nil {
			t.Fatal(err)
		}
		for i, p := range ps {
			got, err := s.GetProvider(ctx, o.ID, p.Slug)
			if err != nil || p.ID == 0 || got.ID != p.ID || got.Name != p.Name || got.ContextLimit != i || !got.CreatedAt.Equal(p.CreatedAt) {
				t.Fatalf("provider %d: %+v, stored %+v, %v", i, p, got, err)
			}
			if len(got.Keys) != len(p.Keys) {
				t.Fatalf("provider %d: %d keys stored, want %d", i, len(got.Keys), len(p.Keys))
			}
			for k := range p.Keys {
				if got.Keys[k].ID != p.Keys[k].ID || got.Keys[k].Weight != p.Keys[k].Weight || got.Keys[k].Ref != p.Keys[k].Ref {
					t.Fatalf("provider %d key %d: %+v, stored %+v", i, k, p.Keys[k], got.Keys[k])
				}
			}
			if h, err := s.SlugHolder(ctx, o.ID, p.Slug); err != nil || h.Kind != "provider" || h.Deleted {
				t.Fatalf("provider %d: slug holder %+v %v", i, h, err)
			}
		}
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		secrets := 0
		for _, p := range st.Providers {
			for k, key := range p.Keys {
				if key.Secret.Reveal() != fmt.Sprintf("sk-%d-%d", p.ContextLimit, k) {
					t.Fatalf("provider %s key %d: secret does not open to what was written", p.Slug, k)
				}
				secrets++
			}
		}
		if secrets != n/3*3 {
			t.Fatalf("%d secrets loaded", secrets)
		}

		single := s.CreateProvider(ctx, &store.Provider{OrgID: o.ID, Slug: "p-00003", Name: "x", Kind: "vllm", BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured"})
		var ce *store.ConflictError
		if !errors.As(single, &ce) {
			t.Fatalf("CreateProvider of a taken slug: %v", single)
		}
		fresh := func(slug string) *store.Provider {
			return &store.Provider{OrgID: o.ID, Slug: slug, Name: slug, Kind: "vllm", BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured",
				Keys: []store.ProviderKey{{Secret: secret.New("sk"), Weight: 1}}}
		}
		for name, batch := range map[string][]*store.Provider{
			"stored": {fresh("new-1"), fresh("p-00003")},
			"twice":  {fresh("new-2"), fresh("new-2")},
		} {
			err := s.Tx(ctx, func(tx store.Store) error {
				err := tx.(interface {
					CreateProviders(context.Context, []*store.Provider) error
				}).CreateProviders(ctx, batch)
				if !errors.As(err, &ce) || err.Error() != single.Error() {
					t.Errorf("%s: %v, want %v", name, err, single)
				}
				return tx.CreateProvider(ctx, fresh("after-"+name))
			})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		for _, slug := range []string{"new-1", "new-2"} {
			if _, err := s.GetProvider(ctx, o.ID, slug); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("provider %s of a failed call: %v", slug, err)
			}
			if _, err := s.SlugHolder(ctx, o.ID, slug); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("slug %s of a failed call: %v", slug, err)
			}
		}
	})
}

// Keys are matched to the ids their rows return by what the rows hold;
// keys alike in all of it (no master key: the same stored secret) each
// take one of their ids.
func TestCreateProvidersKeysMatched(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		same := store.ProviderKey{Secret: secret.New("sk-same"), Weight: 1, Ref: "SAME"}
		ps := []*store.Provider{
			{OrgID: o.ID, Slug: "a", Name: "a", Kind: "vllm", BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured",
				Keys: []store.ProviderKey{same, {Secret: secret.New("sk-other"), Weight: 2}, same}},
			{OrgID: o.ID, Slug: "b", Name: "b", Kind: "vllm", BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured",
				Keys: []store.ProviderKey{same, same}},
		}
		if err := s.CreateProviders(ctx, ps); err != nil {
			t.Fatal(err)
		}
		ids := map[int64]bool{}
		for _, p := range ps {
			got, err := s.GetProvider(ctx, o.ID, p.Slug)
			if err != nil || len(got.Keys) != len(p.Keys) {
				t.Fatalf("%s: %+v %v", p.Slug, got, err)
			}
			stored := map[int64]store.ProviderKey{}
			for _, k := range got.Keys {
				stored[k.ID] = k
			}
			for i, k := range p.Keys {
				g, ok := stored[k.ID]
				if !ok || ids[k.ID] || g.ProviderID != p.ID || g.Weight != k.Weight || g.Ref != k.Ref {
					t.Fatalf("%s key %d: id %d, stored %+v (found %v, taken twice %v)", p.Slug, i, k.ID, g, ok, ids[k.ID])
				}
				ids[k.ID] = true
			}
		}
	})
}
