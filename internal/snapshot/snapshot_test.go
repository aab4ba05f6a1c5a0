package snapshot_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

func TestAuthenticate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Minute), now.Add(time.Minute)
	mk := func(name string) (secret.Secret, store.VirtualKey) {
		tok, lookup := secret.Mint(secret.PrefixVirtualKey)
		return tok, store.VirtualKey{ID: int64(len(name)), ProjectID: 1, Name: name, Lookup: lookup, Hash: secret.HashOf(tok.Reveal())}
	}
	live, kLive := mk("live")
	expiring, kExp := mk("expiring")
	kExp.ExpiresAt = &future
	expired, kExpired := mk("expired!")
	kExpired.ExpiresAt = &past
	revoked, kRev := mk("revoked")
	kRev.RevokedAt = &past
	st := &store.State{
		Orgs:        []store.Org{{ID: 1, Name: "o"}},
		Projects:    []store.Project{{ID: 1, OrgID: 1, Name: "p"}},
		VirtualKeys: []store.VirtualKey{kLive, kExp, kExpired, kRev},
		AdminTokens: []store.AdminToken{
			{ID: 1, Hash: secret.HashOf("admin-1")},
			{ID: 2, Hash: secret.HashOf("admin-2"), OrgID: 1},
			{ID: 3, Hash: secret.HashOf("admin-revoked"), RevokedAt: &past},
			{ID: 4, Hash: secret.HashOf("admin-expired"), ExpiresAt: &past},
			{ID: 5, Hash: secret.HashOf("admin-expiring"), ExpiresAt: &future},
			{ID: 6, Hash: secret.HashOf("admin-orphan"), OrgID: 99}, // never widened to global
		},
	}
	s := snapshot.Build(st, now)
	for _, c := range []struct {
		token string
		ok    bool
	}{
		{live.Reveal(), true},
		{expiring.Reveal(), true},
		{expired.Reveal(), false},
		{revoked.Reveal(), false},
		{live.Reveal() + "x", false}, // same lookup id, wrong secret
		{live.Reveal()[:len(live.Reveal())-1], false},
		{"", false},
		{"sk-" + live.Reveal()[3:], false},
	} {
		k, ok := s.Authenticate(c.token, now)
		if ok != c.ok || (ok && k.Project.Name != "p") {
			t.Errorf("Authenticate(%d chars) = %v, want %v", len(c.token), ok, c.ok)
		}
	}
	for _, c := range []struct {
		token string
		ok    bool
		scope snapshot.AdminScope
	}{
		{"admin-1", true, snapshot.AdminScope{TokenID: 1}},
		{"admin-2", true, snapshot.AdminScope{TokenID: 2, OrgID: 1, Org: "o"}},
		{"admin-expiring", true, snapshot.AdminScope{TokenID: 5}},
		{"admin-revoked", false, snapshot.AdminScope{}},
		{"admin-expired", false, snapshot.AdminScope{}},
		{"admin-orphan", false, snapshot.AdminScope{}},
		{"admin-3", false, snapshot.AdminScope{}},
		{"", false, snapshot.AdminScope{}},
	} {
		sc, ok := s.AdminAuthorize(c.token, now)
		if ok != c.ok || sc != c.scope {
			t.Errorf("AdminAuthorize(%q) = %+v %v, want %+v %v", c.token, sc, ok, c.scope, c.ok)
		}
	}
}

func TestBuildDropsDeletedProviders(t *testing.T) {
	gone := time.Now()
	st := &store.State{
		Orgs:     []store.Org{{ID: 1, Name: "o"}},
		Projects: []store.Project{{ID: 1, OrgID: 1, Name: "p"}},
		Providers: []store.Provider{
			{ID: 1, OrgID: 1, Slug: "live"},
			{ID: 2, OrgID: 1, Slug: "gone", DeletedAt: &gone},
		},
		Routes: []store.Route{{ID: 1, ProjectID: 1, Model: "m", Targets: []store.Target{{ProviderID: 1, Weight: 1}, {ProviderID: 2, Weight: 1}}}},
	}
	s := snapshot.Build(st, gone)
	o := s.Org("o")
	if o.Providers.At("gone") != nil || o.Providers.At("live") == nil {
		t.Fatalf("providers: %v", o.Providers)
	}
	r := o.Projects.At("p").Routes.At("m")
	if len(r.Targets) != 1 || r.Targets[0].Provider.Slug != "live" {
		t.Fatalf("targets: %+v", r.Targets)
	}
}

// TestStoreOutageKeepsSnapshot: when the store cannot be read, Reload fails
// and the previous snapshot keeps serving.
func TestStoreOutageKeepsSnapshot(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		db := storetest.Open(t, d, nil)
		ctx := context.Background()
		o := &store.Org{Name: "o"}
		if err := db.CreateOrg(ctx, o); err != nil {
			t.Fatal(err)
		}
		h := snapshot.NewHolder(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err := h.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		before := h.Current()
		db.Close() // the store goes away
		if err := h.Reload(ctx); err == nil {
			t.Fatal("reload from a closed store succeeded")
		}
		if h.Current() != before || h.Current().Org("o") == nil {
			t.Fatal("snapshot lost during store outage")
		}
	})
}
