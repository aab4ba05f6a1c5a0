package backup

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// Issue 22 and docs/backup.md "Restore under a running gateway": a restore
// into a store that a gateway serves is refused with the reason and changes
// nothing; --force restores anyway and, on PostgreSQL, tells the running
// replicas to reload (their change listener fires); once the gateway has
// stopped, a plain restore goes through.
func TestRestoreUnderRunningGateway(t *testing.T) {
	each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		spec, dir := storetest.Spec(t, d)
		gw := open(t, spec, dir, sealer(t, masterKey)) // the gateway's store
		populate(t, gw)
		path, err := Backup(ctx, spec, dir, t.TempDir(), when)
		must(t, err)
		unmark, err := gw.HoldServing(ctx, spec, dir) // what server.Start holds
		must(t, err)
		must(t, gw.CreateOrg(ctx, &store.Org{Name: "after-backup"}))

		err = Restore(ctx, spec, dir, path)
		if !errors.Is(err, sqlstore.ErrServing) || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "old routing state") {
			t.Fatalf("restore under a running gateway: %v", err)
		}
		if _, err := gw.GetOrg(ctx, "after-backup"); err != nil {
			t.Fatalf("the refused restore changed the store: %v", err)
		}

		// The running replica's change listener, as server.prepare runs it.
		var heard atomic.Int32
		lctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			gw.ListenChanges(lctx, func(sqlstore.Change) { heard.Add(1) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		defer func() { stop(); wg.Wait() }()
		if d == dialectPostgres {
			// fn runs once when LISTEN is established.
			testkit.Eventually(t, "the listener to start", func() bool { return heard.Load() >= 1 })
		}
		before := heard.Load()

		serving, err := RestoreForce(ctx, spec, dir, path)
		if err != nil || !serving {
			t.Fatalf("restore --force: serving %v, %v", serving, err)
		}
		check := open(t, spec, dir, sealer(t, masterKey))
		if _, err := check.GetOrg(ctx, "after-backup"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after restore --force the org made after the backup is still there: %v", err)
		}
		if d == dialectPostgres {
			testkit.Eventually(t, "the replica to be told to reload", func() bool { return heard.Load() > before })
		}

		unmark() // the gateway stops
		if err := Restore(ctx, spec, dir, path); err != nil {
			t.Fatalf("restore with the gateway stopped: %v", err)
		}
	})
}
