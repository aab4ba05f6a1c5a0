package sqlstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// liveTokens returns the names of the unrevoked admin tokens.
func liveTokens(t *testing.T, s store.Store) map[string]bool {
	t.Helper()
	rows, err := s.ListAdminTokens(context.Background(), store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, a := range rows {
		if a.RevokedAt == nil {
			out[a.Name] = true
		}
	}
	return out
}

func TestAdminTokenScopesAndEnv(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		exp := time.Now().Add(time.Hour)
		org := &store.AdminToken{Name: "team", Hash: secret.HashOf("ra-team"), OrgID: o.ID, Lookup: "abc", ExpiresAt: &exp}
		if err := s.CreateAdminToken(ctx, org); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetAdminToken(ctx, org.ID)
		if err != nil || got.OrgID != o.ID || got.OrgName != "acme" || got.Source != store.AdminTokenAPI ||
			got.Lookup != "abc" || got.ExpiresAt == nil || !got.ExpiresAt.Equal(*org.ExpiresAt) {
			t.Fatalf("org token: %+v %v", got, err)
		}

		// The env token: set, changed (the old value revoked), unset, set
		// again (live again).
		h1, h2 := secret.HashOf("env-one"), secret.HashOf("env-two")
		envState := func() (live, revoked int) {
			rows, _ := s.ListAdminTokens(ctx, store.Page{Limit: 100})
			for _, a := range rows {
				if a.Source == store.AdminTokenEnv {
					if a.RevokedAt == nil {
						live++
					} else {
						revoked++
					}
				}
			}
			return
		}
		for i, c := range []struct {
			hash          *secret.Hash
			live, revoked int
		}{{&h1, 1, 0}, {&h1, 1, 0}, {&h2, 1, 1}, {nil, 0, 2}, {&h1, 1, 1}} {
			if err := s.SetEnvAdminToken(ctx, c.hash, time.Now()); err != nil {
				t.Fatal(err)
			}
			if l, r := envState(); l != c.live || r != c.revoked {
				t.Fatalf("step %d: %d live, %d revoked env tokens; want %d, %d", i, l, r, c.live, c.revoked)
			}
		}
		var ce *store.ConflictError
		if err := s.SetEnvAdminToken(ctx, &org.Hash, time.Now()); !errors.As(err, &ce) {
			t.Fatalf("env value of an API token: %v", err)
		}

		// A live org token keeps its org; a revoked one goes with it.
		if err := s.DeleteOrg(ctx, o.ID); !errors.As(err, new(*store.InUseError)) {
			t.Fatalf("delete org with a live token: %v", err)
		}
		if err := s.RevokeAdminToken(ctx, org.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteOrg(ctx, o.ID); err != nil {
			t.Fatalf("delete org with a revoked token: %v", err)
		}
		if _, err := s.GetAdminToken(ctx, org.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("revoked org token after org delete: %v", err)
		}
	})
}

// TestRevokeLastGlobalTokenRace: two concurrent revocations of the last
// two live global tokens never both succeed.
func TestRevokeLastGlobalTokenRace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		for round := range 10 {
			a := &store.AdminToken{Name: "a", Hash: secret.HashOf("a" + string(rune('a'+round)))}
			b := &store.AdminToken{Name: "b", Hash: secret.HashOf("b" + string(rune('a'+round)))}
			for _, tok := range []*store.AdminToken{a, b} {
				if err := s.CreateAdminToken(ctx, tok); err != nil {
					t.Fatal(err)
				}
			}
			if round > 0 { // the previous round's survivor
				rows, _ := s.ListAdminTokens(ctx, store.Page{Limit: 100})
				for _, r := range rows {
					if r.RevokedAt == nil && r.ID != a.ID && r.ID != b.ID {
						if err := s.RevokeAdminToken(ctx, r.ID, time.Now()); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, tok := range []*store.AdminToken{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = s.RevokeAdminToken(ctx, tok.ID, time.Now())
				}()
			}
			wg.Wait()
			ok := 0
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case !errors.Is(err, store.ErrLastAdminToken):
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if ok != 1 || len(liveTokens(t, s)) != 1 {
				t.Fatalf("round %d: %d revocations succeeded, live %v", round, ok, liveTokens(t, s))
			}
		}
	})
}

func TestVirtualKeyUpdateAndDelete(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pr := mustProject(t, s, o.ID, "default")
		other := mustProject(t, s, o.ID, "other")
		tok, lookup := secret.Mint(secret.PrefixVirtualKey)
		k := &store.VirtualKey{ProjectID: pr.ID, Name: "ci", Lookup: lookup, Hash: secret.HashOf(tok.Reveal())}
		if err := s.CreateVirtualKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		exp := time.Now().Add(time.Hour)
		k.Name, k.Models, k.RPMLimit, k.TPMLimit, k.ExpiresAt = "ci-2", []string{"m"}, 5, 50, &exp
		if err := s.UpdateVirtualKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		got, _ := s.GetVirtualKey(ctx, pr.ID, k.ID)
		if got.Name != "ci-2" || len(got.Models) != 1 || got.RPMLimit != 5 || got.TPMLimit != 50 || got.ExpiresAt == nil ||
			got.Lookup != lookup || !got.Hash.Equal(secret.HashOf(tok.Reveal())) {
			t.Fatalf("updated key: %+v", got)
		}
		wrong := *k
		wrong.ProjectID = other.ID
		if err := s.UpdateVirtualKey(ctx, &wrong); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("update through another project: %v", err)
		}
		if err := s.DeleteVirtualKey(ctx, pr.ID, k.ID); !errors.Is(err, store.ErrNotRevoked) {
			t.Fatalf("delete live key: %v", err)
		}
		if err := s.RevokeVirtualKey(ctx, k.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateVirtualKey(ctx, k); !errors.Is(err, store.ErrRevoked) {
			t.Fatalf("update revoked key: %v", err)
		}
		if err := s.DeleteVirtualKey(ctx, other.ID, k.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("delete through another project: %v", err)
		}
		if err := s.DeleteVirtualKey(ctx, pr.ID, k.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteProject(ctx, pr.ID); err != nil {
			t.Fatalf("delete project after its key: %v", err)
		}
	})
}
