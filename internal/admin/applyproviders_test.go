package admin_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store/storetest"
)

// Issue 21: an apply creates new providers in batches, each checked as
// CreateProvider checks it. The first that fails its checks stops the
// apply, named by its entry, with the providers before it created (in a
// create-only apply); a slug a deleted provider holds fails the batch's
// write, and the providers are then created one at a time, so that the
// entry gets the error a create of its own gets.
func TestApplyProviderBatchFailures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		file := func(n int, mod func(i int, p *admin.ProviderInput)) admin.Desired {
			d := admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"}}}}
			for i := range n {
				p := admin.ProviderInput{Slug: fmt.Sprintf("p%03d", i), Kind: "openai", BaseURL: fmt.Sprintf("https://p%d.example/v1", i),
					Keys: []admin.KeyInput{keyed("", fmt.Sprintf("sk-%d", i), 1)}}
				mod(i, &p)
				d.Orgs[0].Providers = append(d.Orgs[0].Providers, admin.DesiredProvider{ProviderInput: p})
			}
			return d
		}
		count := func(e *applyEnv) int {
			page, err := e.svc.ListProviders(ctx, "acme", admin.PageRequest{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			return len(page.Data)
		}

		e := newApplyEnv(t, d)
		_, err := e.svc.Apply(ctx, file(30, func(i int, p *admin.ProviderInput) {
			if i == 17 {
				p.BaseURL = "not a url"
			}
		}), admin.ApplyOptions{CreateOnly: true})
		var ae *admin.ApplyError
		if !errors.As(err, &ae) || ae.Entry != "orgs[0].providers[17]" || admin.AsError(err).Code != admin.CodeValidation {
			t.Fatalf("an invalid provider: %v", err)
		}
		if n := count(e); n != 17 {
			t.Fatalf("%d providers kept, want 17", n)
		}

		// A slug a deleted provider holds.
		e = newApplyEnv(t, d)
		if _, err := e.svc.CreateOrg(ctx, admin.OrgInput{Name: "acme"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.CreateProvider(ctx, "acme", admin.ProviderInput{Slug: "p005", Kind: "openai", BaseURL: "https://x.example/v1"}); err != nil {
			t.Fatal(err)
		}
		if err := e.svc.DeleteProvider(ctx, "acme", "p005", false, false); err != nil {
			t.Fatal(err)
		}
		_, err = e.svc.Apply(ctx, file(10, func(int, *admin.ProviderInput) {}), admin.ApplyOptions{CreateOnly: true})
		if !errors.As(err, &ae) || ae.Entry != "orgs[0].providers[5]" || admin.AsError(err).Code != admin.CodeSlugTaken {
			t.Fatalf("a reserved slug: %v", err)
		}
		if n := count(e); n != 5+1 { // and the deleted one
			t.Fatalf("%d providers, want 6", n)
		}
	})
}
