package admin_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

func vllm(name, slug string) admin.DesiredProvider {
	return admin.DesiredProvider{ProviderInput: admin.ProviderInput{Name: name, Slug: slug, Kind: "vllm", BaseURL: "http://10.0.0.5:8000/v1"}}
}

func orgWith(ps ...admin.DesiredProvider) admin.Desired {
	return admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"}, Providers: ps}}}
}

// slugs lists the org's providers as "slug=name", in id order.
func (e *applyEnv) slugs(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	o, err := e.db.GetOrg(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := e.db.ListProviders(ctx, o.ID, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.Slug+"="+p.Name)
	}
	return out
}

// TestApplyBackfillsDerivedSlugs: design 000 "Slug collision handling" on
// every import path (--config and rolter import apply create-only, rolter
// apply reconciles): entries that name no slug and derive the same one
// are backfilled, the first claimant bare, later ones -2, -3, with a
// report (slug_base and a note) on each; re-applying the file, even
// reordered, maps every entry to the slug it got the first time.
func TestApplyBackfillsDerivedSlugs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		for _, opt := range []admin.ApplyOptions{{CreateOnly: true}, {}} {
			e := newApplyEnv(t, d)
			file := orgWith(vllm("vLLM", ""), vllm("VLLM!", ""), vllm("v.LLM", ""))
			res := e.apply(t, file, opt)
			want := []string{"vllm=vLLM", "vllm-2=VLLM!", "v-llm=v.LLM"}
			if got := e.slugs(t); !reflect.DeepEqual(got, want) {
				t.Fatalf("create-only %v: slugs %v, want %v", opt.CreateOnly, got, want)
			}
			var bases []string
			for _, c := range res.Changes {
				if c.Kind == admin.KindProvider {
					if c.Action != admin.ActionCreate {
						t.Errorf("%s: %s, want create", c.Name, c.Action)
					}
					if c.SlugBase != "" {
						bases = append(bases, c.Name+"<"+c.SlugBase)
						if len(c.Notes) != 1 {
							t.Errorf("%s: notes %v", c.Name, c.Notes)
						}
					}
				}
			}
			if !reflect.DeepEqual(bases, []string{"acme/vllm-2<vllm"}) {
				t.Fatalf("backfill report: %v", bases)
			}
			// Idempotent, and matched by name when reordered.
			for _, again := range []admin.Desired{file, orgWith(vllm("VLLM!", ""), vllm("v.LLM", ""), vllm("vLLM", ""))} {
				res = e.apply(t, again, opt)
				for _, c := range res.Changes {
					if c.Kind == admin.KindProvider && (c.Action != admin.ActionUnchanged || c.SlugBase != "") {
						t.Fatalf("re-apply: %+v", c)
					}
				}
				if got := e.slugs(t); !reflect.DeepEqual(got, want) {
					t.Fatalf("re-apply: slugs %v, want %v", got, want)
				}
			}
			// A third claimant continues the row.
			e.apply(t, orgWith(vllm("vLLM", ""), vllm("VLLM!", ""), vllm("v.LLM", ""), vllm("vllm", "")), opt)
			if got := e.slugs(t); !reflect.DeepEqual(got, append(want, "vllm-3=vllm")) {
				t.Fatalf("third claimant: %v", got)
			}
		}
	})
}

// TestApplyBackfillSkipsReservedSlugs: design 000 §3 and "Slug collision
// handling": a derived slug held by a deleted provider or a group is not
// the entry's, so the backfill moves on; an explicit slug that collides
// (with another entry, or with what holds it) is an error naming the
// entry, never "left unchanged".
func TestApplyBackfillSkipsReservedSlugs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newApplyEnv(t, d)
		ctx := context.Background()
		e.apply(t, orgWith(vllm("vLLM", ""), vllm("Pool", "pool")), admin.ApplyOptions{CreateOnly: true})
		if err := e.svc.DeleteProvider(ctx, "acme", "vllm", false, false); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.CreateGroup(ctx, "acme", admin.GroupInput{Slug: "gpu", Members: []admin.GroupMemberInput{{Provider: "pool"}}}); err != nil {
			t.Fatal(err)
		}
		for _, opt := range []admin.ApplyOptions{{CreateOnly: true}, {}} {
			e.apply(t, orgWith(vllm("Pool", "pool"), vllm("vLLM", ""), vllm("GPU", "")), opt)
		}
		if got := e.slugs(t); !reflect.DeepEqual(got, []string{"vllm=vLLM", "pool=Pool", "vllm-2=vLLM", "gpu-2=GPU"}) {
			t.Fatalf("slugs: %v", got)
		}
		for name, file := range map[string]admin.Desired{
			"two entries":     orgWith(vllm("Pool", "pool"), vllm("a", "x"), vllm("b", "x")),
			"a deleted one":   orgWith(vllm("Pool", "pool"), vllm("again", "vllm")),
			"a group of mine": orgWith(vllm("Pool", "pool"), vllm("gpu box", "gpu")),
		} {
			for _, opt := range []admin.ApplyOptions{{CreateOnly: true}, {}} {
				_, err := e.svc.Apply(ctx, file, opt)
				var ae *admin.ApplyError
				if !errors.As(err, &ae) || ae.Entry == "" || ae.Kind != admin.KindProvider {
					t.Fatalf("%s (create-only %v): %v", name, opt.CreateOnly, err)
				}
			}
		}
	})
}
