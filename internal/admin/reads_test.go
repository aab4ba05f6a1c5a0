package admin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store/storetest"
)

// The Service itself confines an org-scoped caller to its org, so every
// caller (the admin API, the web UI, a CLI) gets the same rule: another
// org, the org list beyond its own, org creation and admin tokens are not
// found for it, and reads of its own org work.
func TestServiceScopeConfinesOrgToken(t *testing.T) {
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			ctx := context.Background()
			db := storetest.Open(t, d, nil)
			svc := admin.NewService(db, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
			for _, name := range []string{"a", "b"} {
				if _, err := svc.CreateOrg(ctx, admin.OrgInput{Name: name}); err != nil {
					t.Fatal(err)
				}
				if _, err := svc.CreateProvider(ctx, name, admin.ProviderInput{Name: "p", Kind: "openai", BaseURL: "http://10.0.0.5:8000/v1"}); err != nil {
					t.Fatal(err)
				}
			}
			a, err := db.GetOrg(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			scoped := admin.WithScope(ctx, snapshot.AdminScope{TokenID: 9, OrgID: a.ID, Org: "a"})

			orgs, err := svc.ListOrgs(scoped, admin.PageRequest{})
			if err != nil || len(orgs.Data) != 1 || orgs.Data[0].Name != "a" {
				t.Fatalf("org token lists %+v, %v; want only org a", orgs, err)
			}
			if all, err := svc.ListOrgs(ctx, admin.PageRequest{}); err != nil || len(all.Data) != 2 {
				t.Fatalf("in-process (global) caller lists %+v, %v; want both orgs", all, err)
			}
			if p, err := svc.GetProvider(scoped, "a", "p"); err != nil || p.Slug != "p" {
				t.Fatalf("own org's provider: %+v, %v", p, err)
			}
			notFound := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, admin.ErrNotFound) {
					t.Fatalf("%s: %v, want not found", what, err)
				}
			}
			_, err = svc.GetProvider(scoped, "b", "p")
			notFound("other org's provider", err)
			_, err = svc.ListProviders(scoped, "b", admin.PageRequest{})
			notFound("other org's provider list", err)
			_, err = svc.CreateProvider(scoped, "b", admin.ProviderInput{Name: "q", Kind: "openai", BaseURL: "http://10.0.0.5:8000/v1"})
			notFound("create in other org", err)
			_, err = svc.CreateOrg(scoped, admin.OrgInput{Name: "c"})
			notFound("create org", err)
			_, err = svc.ListTokens(scoped, admin.PageRequest{})
			notFound("list admin tokens", err)
			_, err = svc.CreateAdminToken(scoped, admin.AdminTokenInput{Name: "x"})
			notFound("mint admin token", err)
			if pb, err := svc.ListProviders(ctx, "b", admin.PageRequest{}); err != nil || len(pb.Data) != 1 {
				t.Fatalf("org b after the refusals: %+v, %v; want its one provider", pb, err)
			}
		})
	}
}

// A page request out of bounds is refused with the field named.
func TestServicePageRequestBounds(t *testing.T) {
	db := storetest.Open(t, storetest.Dialects[0], nil)
	svc := admin.NewService(db, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, pr := range []admin.PageRequest{{Limit: -1}, {Limit: 1001}, {Cursor: "x"}, {Cursor: "-3"}} {
		_, err := svc.ListOrgs(context.Background(), pr)
		var ae *admin.Error
		if !errors.As(err, &ae) || !errors.Is(err, admin.ErrInvalid) || len(ae.Fields) != 1 {
			t.Fatalf("%+v: %v, want one invalid field", pr, err)
		}
	}
	if _, err := svc.ListOrgs(context.Background(), admin.PageRequest{Limit: 1000}); err != nil {
		t.Fatal(err)
	}
}

// Serving answers from the routing snapshot: the project's routes with
// their targets, the live providers with their catalogs (configured
// models plus what routes send them), the groups; confined to the
// caller's org like every read.
func TestServiceServingReadsTheSnapshot(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, storetest.Dialects[0], nil)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	snap := snapshot.NewHolder(db, log)
	if err := snap.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	svc := admin.NewService(db, snap, log)
	if _, err := svc.Serving(ctx, "o", "p"); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("unknown org: %v", err)
	}
	if _, err := svc.CreateOrg(ctx, admin.OrgInput{Name: "o"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateProject(ctx, "o", admin.ProjectInput{Name: "p"}); err != nil {
		t.Fatal(err)
	}
	for _, slug := range []string{"b", "a"} {
		if _, err := svc.CreateProvider(ctx, "o", admin.ProviderInput{Name: slug, Slug: slug, Kind: "openai",
			BaseURL: "http://10.0.0.5:8000/v1", Models: []string{"m-" + slug}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.CreateRoute(ctx, "o", "p", admin.RouteInput{Model: "chat",
		Targets: []admin.TargetInput{{Provider: "a", UpstreamModel: "big"}}}); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteProvider(ctx, "o", "b", false, false); err != nil {
		t.Fatal(err)
	}
	sv, err := svc.Serving(ctx, "o", "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(sv.Providers) != 1 || sv.Providers[0].Slug != "a" {
		t.Fatalf("providers %+v, want the live one, a", sv.Providers)
	}
	if got := sv.Catalog["a"]; len(got) != 2 || got[0] != "big" || got[1] != "m-a" {
		t.Fatalf("catalog of a: %v, want [big m-a]", got)
	}
	if len(sv.Routes) != 1 || sv.Routes[0].Model != "chat" || sv.Routes[0].Targets[0].Provider != "a" {
		t.Fatalf("routes %+v", sv.Routes)
	}
	if _, err := svc.Serving(ctx, "o", "nope"); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("unknown project: %v", err)
	}
	other := admin.WithScope(ctx, snapshot.AdminScope{TokenID: 1, OrgID: 99, Org: "x"})
	if _, err := svc.Serving(other, "o", "p"); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("another org's token: %v", err)
	}
}

// A token's scope is its org by id, not by name: after its org is renamed
// and another org takes the old name (on another replica, before this
// one's snapshot catches up), the token still reaches nothing of the
// other org.
func TestServiceScopeIsTheOrgIDNotItsName(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, storetest.Dialects[0], nil)
	svc := admin.NewService(db, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, name := range []string{"acme", "victim"} {
		if _, err := svc.CreateOrg(ctx, admin.OrgInput{Name: name}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.CreateProvider(ctx, name, admin.ProviderInput{Name: "p", Kind: "openai", BaseURL: "http://10.0.0.5:8000/v1"}); err != nil {
			t.Fatal(err)
		}
	}
	acme, err := db.GetOrg(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	// The scope as a stale snapshot still gives it: id of acme, name acme.
	stale := admin.WithScope(ctx, snapshot.AdminScope{TokenID: 1, OrgID: acme.ID, Org: "acme"})
	for _, rename := range [][2]string{{"acme", "acme-old"}, {"victim", "acme"}} {
		name := rename[1]
		if _, err := svc.PatchOrg(ctx, rename[0], admin.OrgPatch{Name: &name}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.ListProviders(stale, "acme", admin.PageRequest{}); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("the other org, now named acme: %v, want not found", err)
	}
	if _, err := svc.CreateProvider(stale, "acme", admin.ProviderInput{Name: "q", Kind: "openai", BaseURL: "http://10.0.0.5:8000/v1"}); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("a write into the other org: %v, want not found", err)
	}
	if orgs, err := svc.ListOrgs(stale, admin.PageRequest{}); err != nil || len(orgs.Data) != 0 {
		t.Fatalf("org list: %+v, %v; want nothing", orgs.Data, err)
	}
	if _, err := svc.MintFirstStartToken(stale); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("an org token minting a first-start (global) token: %v", err)
	}
}
