package admin_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// keysFile is one org with one project of n virtual keys: n+2 entries.
func keysFile(n int) admin.Desired {
	d := admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"},
		Projects: []admin.DesiredProject{{ProjectInput: admin.ProjectInput{Name: "web"}}}}}}
	for i := range n {
		d.Orgs[0].Projects[0].Keys = append(d.Orgs[0].Projects[0].Keys, admin.VirtualKeyInput{Name: fmt.Sprintf("k%05d", i)})
	}
	return d
}

// A desired state of more than MaxApplyEntries entries is refused before
// the store is touched: on a closed store, 10,001 entries are
// too_many_entries, and 10,000 get as far as the store.
func TestApplyEntryCap(t *testing.T) {
	e := newApplyEnv(t, "sqlite")
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	over := keysFile(admin.MaxApplyEntries - 1) // with the org and the project: one over
	if n := over.Entries(); n != admin.MaxApplyEntries+1 {
		t.Fatalf("Entries() = %d", n)
	}
	for _, opt := range []admin.ApplyOptions{{}, {DryRun: true}, {CreateOnly: true}} {
		_, err := e.svc.Apply(context.Background(), over, opt)
		if ae := admin.AsError(err); ae == nil || ae.Code != admin.CodeTooManyEntries || ae.Kind != admin.ErrInvalid {
			t.Fatalf("%+v: %d entries: %v", opt, over.Entries(), err)
		}
	}
	at := keysFile(admin.MaxApplyEntries - 2)
	_, err := e.svc.Apply(context.Background(), at, admin.ApplyOptions{})
	if ae := admin.AsError(err); ae == nil || ae.Code == admin.CodeTooManyEntries {
		t.Fatalf("%d entries on a closed store: %v", at.Entries(), err)
	}
	// Every kind counts.
	d := admin.Desired{Orgs: []admin.DesiredOrg{{
		Providers: []admin.DesiredProvider{{ProviderInput: admin.ProviderInput{Keys: make([]admin.KeyInput, 2)}}},
		Groups:    []admin.DesiredGroup{{GroupInput: admin.GroupInput{Members: make([]admin.GroupMemberInput, 3)}}},
		Projects: []admin.DesiredProject{{Routes: []admin.RouteInput{{Targets: make([]admin.TargetInput, 4)}},
			Keys: make([]admin.VirtualKeyInput, 5)}},
		Hosts: make([]admin.HostInput, 6),
	}}}
	if n, want := d.Entries(), 1+1+2+1+3+1+1+4+5+6; n != want {
		t.Fatalf("Entries() = %d, want %d", n, want)
	}
}

// Re-applying a large unchanged file costs time linear in its size: each
// entry is matched by a map lookup, not a scan of what exists.
func TestApplyLargeFileUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("applies 5,000 keys twice")
	}
	storetest.Each(t, func(t *testing.T, d string) {
		e := newApplyEnv(t, d)
		file := keysFile(5000)
		start := time.Now()
		e.apply(t, file, admin.ApplyOptions{})
		first := time.Since(start)
		start = time.Now()
		res := e.apply(t, file, admin.ApplyOptions{Prune: true})
		t.Logf("%s: 5,000 keys: first apply %v, unchanged re-apply with prune %v", d, first, time.Since(start))
		if res.Changed() || len(res.Changes) != 5002 {
			t.Fatalf("re-apply: changed %v, %d changes", res.Changed(), len(res.Changes))
		}
	})
}

// holdApplyLock holds, until release is closed, a write transaction of
// db that has taken the apply's lock: an apply meanwhile cannot commit
// (on SQLite, it waits for the store's one connection; on PostgreSQL, for
// the lock).
func holdApplyLock(t *testing.T, db store.Store) (release func()) {
	t.Helper()
	holding, done, stop := make(chan struct{}), make(chan error, 1), make(chan struct{})
	go func() {
		done <- db.Tx(context.Background(), func(st store.Store) error {
			if err := st.(store.TxLocker).LockTx(context.Background(), admin.ApplyLock); err != nil {
				return err
			}
			if err := st.CreateOrg(context.Background(), &store.Org{Name: "blocker"}); err != nil {
				return err
			}
			close(holding)
			<-stop
			return nil
		})
	}()
	select {
	case <-holding:
	case err := <-done:
		t.Fatalf("holding the apply lock: %v", err)
	}
	return func() {
		close(stop)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// An apply that cannot finish within its deadline is rolled back and
// answers apply_timeout (not an internal error). Here another transaction
// holds the store (SQLite) or the apply's advisory lock (PostgreSQL, as
// an apply on another replica would).
func TestApplyDeadline(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newApplyEnv(t, d)
		e.svc.SetApplyTimeout(300 * time.Millisecond)
		release := holdApplyLock(t, e.db)
		_, err := e.svc.Apply(context.Background(), oneProvider(), admin.ApplyOptions{})
		release()
		ae := admin.AsError(err)
		if ae == nil || ae.Code != admin.CodeApplyTimeout || ae.Kind != admin.ErrUnavailable {
			t.Fatalf("apply past its deadline: %v", err)
		}
		if _, err := e.db.GetOrg(context.Background(), "acme"); err == nil {
			t.Fatal("the apply past its deadline created its org")
		}
		if e.commits != 0 {
			t.Fatal("the apply past its deadline announced itself")
		}
		// With the lock free, the same apply goes through.
		e.svc.SetApplyTimeout(admin.ApplyTimeout)
		if res := e.apply(t, oneProvider(), admin.ApplyOptions{}); !res.Changed() {
			t.Fatal("the apply changed nothing")
		}
	})
}

// One apply runs at a time in a process: while one waits for the store,
// another is refused at once with apply_in_progress, and the first then
// completes.
func TestApplyOneAtATime(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newApplyEnv(t, d)
		release := holdApplyLock(t, e.db)
		errs := make(chan error, 2)
		for _, org := range []string{"acme", "other"} {
			go func() {
				f := oneProvider()
				f.Orgs[0].Name = org
				_, err := e.svc.Apply(context.Background(), f, admin.ApplyOptions{})
				errs <- err
			}()
		}
		// The one that took the slot waits for the lock, so the first
		// answer is the other's refusal.
		first := <-errs
		release()
		second := <-errs
		if ae := admin.AsError(first); ae == nil || ae.Code != admin.CodeApplyInProgress || ae.Kind != admin.ErrConflict {
			t.Fatalf("concurrent apply: %v", first)
		}
		if second != nil {
			t.Fatalf("the apply that waited: %v", second)
		}
	})
}
