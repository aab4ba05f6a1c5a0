package admin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// Every write is a Service method that runs the committed hook once it has
// committed, and none when it refuses: callers other than HTTP (the
// importer, a UI, a CLI) get the same validation and the same announcement.
// The service here has no snapshot, as in rolter import.
func TestServiceWritesRunCommittedHook(t *testing.T) {
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			ctx := context.Background()
			db := storetest.Open(t, d, nil)
			svc := admin.NewService(db, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
			commits := 0
			svc.SetPublisher(func(context.Context) { commits++ })
			want := 0
			committed := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if want++; commits != want {
					t.Fatalf("%s: the committed hook ran %d times in all, want %d", what, commits, want)
				}
			}
			refused := func(what string, err error, sentinel error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: accepted", what)
				}
				if !errors.Is(err, sentinel) {
					t.Fatalf("%s: %v, want %v", what, err, sentinel)
				}
				if commits != want {
					t.Fatalf("%s: refused, yet the committed hook ran", what)
				}
			}

			_, err := svc.CreateOrg(ctx, admin.OrgInput{Name: "o"})
			committed("create org", err)
			desc := "renamed"
			_, err = svc.PatchOrg(ctx, "o", admin.OrgPatch{Description: &desc})
			committed("patch org", err)
			bad := "-bad"
			_, err = svc.PatchOrg(ctx, "o", admin.OrgPatch{Name: &bad})
			refused("patch org with a bad name", err, admin.ErrInvalid)
			if o, _ := db.GetOrg(ctx, "o"); o == nil || o.Description != "renamed" {
				t.Fatalf("org after patches: %+v", o)
			}

			_, err = svc.CreateProject(ctx, "o", admin.ProjectInput{Name: "p"})
			committed("create project", err)
			rpm := 60
			_, err = svc.PatchProject(ctx, "o", "p", admin.ProjectPatch{RPMLimit: &rpm})
			committed("patch project", err)
			_, err = svc.PatchProject(ctx, "missing", "p", admin.ProjectPatch{RPMLimit: &rpm})
			refused("patch a project of a missing org", err, admin.ErrNotFound)

			_, err = svc.CreateProvider(ctx, "o", admin.ProviderInput{Name: "prov", Kind: "openai", BaseURL: "https://api.openai.com/v1",
				Keys: []admin.KeyInput{{Secret: secret.New("sk-service-test-0001")}}})
			committed("create provider", err)
			_, err = svc.CreateProvider(ctx, "o", admin.ProviderInput{Name: "prov", Kind: "openai", BaseURL: "https://api.openai.com/v1",
				Keys: []admin.KeyInput{{Secret: secret.New("sk-service-test-0001")}}})
			refused("create the provider again", err, admin.ErrConflict)
			k, err := svc.AddProviderKey(ctx, "o", "prov", admin.KeyInput{Secret: secret.New("sk-service-test-0002")})
			committed("add provider key", err)
			_, err = svc.AddProviderKey(ctx, "o", "prov", admin.KeyInput{})
			refused("add a provider key without a secret", err, admin.ErrInvalid)
			committed("delete provider key", svc.DeleteProviderKey(ctx, "o", "prov", strconv.FormatInt(k.ID, 10)))

			_, err = svc.CreateRoute(ctx, "o", "p", admin.RouteInput{Model: "m", Targets: []admin.TargetInput{{Provider: "prov", UpstreamModel: "gpt-4o"}}})
			committed("create route", err)
			_, err = svc.PatchRoute(ctx, "o", "p", "m", admin.RoutePatch{RPMLimit: &rpm})
			committed("patch route", err)
			pj, _ := db.GetProject(ctx, mustOrg(t, db, "o").ID, "p")
			if r, err := db.GetRoute(ctx, pj.ID, "m"); err != nil || r.RPMLimit != 60 {
				t.Fatalf("route after patch: %+v %v", r, err)
			}
			committed("delete route", svc.DeleteRoute(ctx, "o", "p", "m"))
			refused("delete the route again", svc.DeleteRoute(ctx, "o", "p", "m"), admin.ErrNotFound)

			vk, err := svc.CreateVirtualKey(ctx, "o", "p", admin.VirtualKeyInput{Name: "k"})
			committed("create virtual key", err)
			id := strconv.FormatInt(vk.ID, 10)
			refused("purge a live key", svc.PurgeVirtualKey(ctx, "o", "p", id), admin.ErrConflict)
			v, err := svc.RevokeVirtualKey(ctx, "o", "p", id)
			committed("revoke virtual key", err)
			if v.RevokedAt == nil {
				t.Fatalf("revoked key view: %+v", v)
			}
			committed("purge virtual key", svc.PurgeVirtualKey(ctx, "o", "p", id))

			refused("delete an org that holds a project", svc.DeleteOrg(ctx, "o"), admin.ErrConflict)
			committed("delete provider", svc.DeleteProvider(ctx, "o", "prov", false, false))
			refused("delete the deleted provider", svc.DeleteProvider(ctx, "o", "prov", false, false), admin.ErrNotFound)
			committed("purge provider", svc.DeleteProvider(ctx, "o", "prov", true, false))
			committed("delete project", svc.DeleteProject(ctx, "o", "p"))
			committed("delete org", svc.DeleteOrg(ctx, "o"))
			if _, err := db.GetOrg(ctx, "o"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("org after delete: %v", err)
			}

			// The bootstrap writes of the admin tokens go through the
			// Service too, so a replica's start announces them.
			first, err := svc.NeverHadAdminToken(ctx)
			if err != nil || !first {
				t.Fatalf("a store without tokens: first start %v, %v", first, err)
			}
			_, err = svc.MintFirstStartToken(ctx)
			committed("mint the first-start admin token", err)
			if first, _ := svc.NeverHadAdminToken(ctx); first {
				t.Fatal("still a first start after minting a token")
			}
			env, _ := secret.Mint(secret.PrefixAdminToken)
			committed("set ROLTER_ADMIN_TOKEN", svc.SetEnvAdminToken(ctx, env))
			committed("unset ROLTER_ADMIN_TOKEN", svc.SetEnvAdminToken(ctx, secret.Secret{}))
		})
	}
}

func mustOrg(t *testing.T, db store.Store, name string) *store.Org {
	t.Helper()
	o, err := db.GetOrg(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// loaderFunc is a snapshot.Loader.
type loaderFunc func(context.Context) (*store.State, error)

func (f loaderFunc) Load(ctx context.Context) (*store.State, error) { return f(ctx) }

// A write whose caller leaves right after the commit still rebuilds the
// snapshot and announces itself: here the context is canceled as the
// rebuild starts.
func TestServiceChangedOutlivesTheCaller(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		db := storetest.Open(t, d, nil)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h := snapshot.NewHolder(loaderFunc(func(lctx context.Context) (*store.State, error) {
			cancel()
			return db.Load(lctx)
		}), log)
		svc := admin.NewService(db, h, log)
		published := 0
		svc.SetPublisher(func(pctx context.Context) {
			if pctx.Err() == nil {
				published++
			}
		})
		if _, err := svc.CreateOrg(ctx, admin.OrgInput{Name: "late"}); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() == nil {
			t.Fatal("the rebuild did not run")
		}
		if cur := h.Current(); cur == nil || cur.Org("late") == nil {
			t.Fatal("the snapshot was not rebuilt after the caller left")
		}
		if published != 1 {
			t.Fatalf("announced %d times with a live context, want 1", published)
		}
	})
}
