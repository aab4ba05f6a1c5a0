package sqlstore_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

// A replica hears what another announced: a fleet-only change as
// ChangeFleet, a routing change as ChangeConfig, and a burst holding both
// as one ChangeConfig. Its own announcements it ignores.
func TestListenChangesKinds(t *testing.T) {
	spec, dir := storetest.Spec(t, "postgres")
	ctx, cancel := context.WithCancel(context.Background())
	a, err := sqlstore.Open(ctx, spec, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlstore.Open(ctx, spec, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	heard := make(chan sqlstore.Change, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.ListenChanges(ctx, func(c sqlstore.Change) { heard <- c }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); <-done }()
	next := func(what string) sqlstore.Change {
		t.Helper()
		select {
		case c := <-heard:
			return c
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: nothing heard", what)
			return 0
		}
	}
	if c := next("listening"); c != sqlstore.ChangeConfig {
		t.Fatalf("on LISTEN: %v, want a full change", c)
	}
	if err := a.NotifyChange(ctx); err != nil { // its own: ignored
		t.Fatal(err)
	}
	if err := b.NotifyFleetChange(ctx); err != nil {
		t.Fatal(err)
	}
	if c := next("fleet change"); c != sqlstore.ChangeFleet {
		t.Fatalf("fleet change heard as %v", c)
	}
	if err := b.NotifyFleetChange(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.NotifyChange(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.NotifyFleetChange(ctx); err != nil {
		t.Fatal(err)
	}
	// The burst may be heard as one call or split; any call holding the
	// routing change says so, and none says more than was sent.
	sawConfig := false
	for !sawConfig {
		sawConfig = next("burst") == sqlstore.ChangeConfig
	}
	select {
	case c := <-heard:
		if c != sqlstore.ChangeFleet {
			t.Fatalf("after the burst's routing change: %v", c)
		}
	default:
	}
}
