package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/backup"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

// Issue 22, restore under a running gateway: a started gateway marks its
// store, so rolter restore refuses while it serves, and not after it stops.
func TestRunningGatewayRefusesRestore(t *testing.T) {
	dir := t.TempDir()
	r := start(t, server.Config{DataDir: dir})
	artifact, err := backup.Backup(context.Background(), "", dir, t.TempDir(), time.Now())
	if err != nil {
		_ = r.srv.Shutdown()
		t.Fatal(err)
	}
	err = backup.Restore(context.Background(), "", dir, artifact)
	_ = r.srv.Shutdown()
	if !errors.Is(err, sqlstore.ErrServing) {
		t.Fatalf("restore under a running gateway: %v, want ErrServing", err)
	}
	if err := backup.Restore(context.Background(), "", dir, artifact); err != nil {
		t.Fatalf("restore after shutdown: %v", err)
	}
}
