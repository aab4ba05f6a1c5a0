package admin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// The fleet endpoints hear of every committed write to hosts, whether or
// not the snapshot rebuild after it succeeds: a retired host leaves
// /vllm/config even while the snapshot cannot be rebuilt. A write to
// hosts that changes no routing is announced to the other replicas as a
// fleet-only change, a routing one as a full change.
func TestFleetChangedWithoutRebuild(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		db := storetest.Open(t, d, nil)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		var failing atomic.Bool
		h := snapshot.NewHolder(loaderFunc(func(lctx context.Context) (*store.State, error) {
			if failing.Load() {
				return nil, errors.New("store unreachable")
			}
			return db.Load(lctx)
		}), log)
		if err := h.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		svc := admin.NewService(db, h, log)
		var fleetChanged, full, fleetOnly atomic.Int64
		svc.SetFleetChanged(func() { fleetChanged.Add(1) })
		svc.SetPublisher(func(context.Context) { full.Add(1) })
		svc.SetFleetPublisher(func(context.Context) { fleetOnly.Add(1) })
		if _, err := svc.CreateOrg(ctx, admin.OrgInput{Name: "acme"}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.CreateProject(ctx, "acme", admin.ProjectInput{Name: "default"}); err != nil && !admin.AlreadyExists(err) {
			t.Fatal(err)
		}
		hv, err := svc.CreateHost(ctx, "acme", admin.HostInput{IP: "10.1.0.1", Port: 8000, ModelName: "qwen3", Recipe: bulkRecipe("--max-model-len", "32768")})
		if err != nil {
			t.Fatal(err)
		}
		if fleetOnly.Load() != 1 {
			t.Fatalf("creating a host: %d fleet-only announcements, want 1", fleetOnly.Load())
		}

		failing.Store(true)
		before, fullBefore := fleetChanged.Load(), full.Load()
		if _, err := svc.RetireHost(ctx, "acme", strconv.FormatInt(hv.ID, 10)); err != nil {
			t.Fatal(err)
		}
		if fleetChanged.Load() == before {
			t.Fatal("a retire whose rebuild failed did not reach the fleet endpoints")
		}
		if full.Load() != fullBefore+1 {
			t.Fatalf("a retire (a routing change): %d full announcements, want 1", full.Load()-fullBefore)
		}
	})
}
