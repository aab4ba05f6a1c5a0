package sqlstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// A pool key keeps the environment reference it was added with, and it can
// be changed without touching the secret.
func TestProviderKeyRef(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		p := &store.Provider{OrgID: o.ID, Slug: "openai", Name: "openai", Kind: "openai", BaseURL: "https://api.openai.com/v1",
			MetadataSource: "configured", Keys: []store.ProviderKey{{Secret: secret.New("sk-FAKE-ref-1"), Weight: 1, Ref: "OPENAI_KEY"}}}
		if err := s.CreateProvider(ctx, p); err != nil {
			t.Fatal(err)
		}
		k := &store.ProviderKey{ProviderID: p.ID, Secret: secret.New("sk-FAKE-ref-2"), Weight: 2}
		if err := s.AddProviderKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		if err := s.SetProviderKeyRef(ctx, p.ID, k.ID, "OPENAI_KEY_2"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetProviderKeyRef(ctx, p.ID, k.ID+100, "X"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ref of a missing key: %v, want ErrNotFound", err)
		}
		got, err := s.GetProvider(ctx, o.ID, "openai")
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Keys) != 2 || got.Keys[0].Ref != "OPENAI_KEY" || got.Keys[1].Ref != "OPENAI_KEY_2" || got.Keys[1].Weight != 2 {
			t.Fatalf("keys = %+v", got.Keys)
		}
	})
}
