package sqlstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

var errStop = errors.New("stop")

// Writes inside Tx are one transaction: all committed, or none.
func TestTxCommitsOrRollsBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)

		err := s.Tx(ctx, func(st store.Store) error {
			o := mustOrg(t, st, "kept")
			mustProject(t, st, o.ID, "web")
			mustProvider(t, st, o.ID, "vllm", "sk-FAKE-tx-1")
			// Load inside the transaction sees its own writes.
			state, err := st.Load(ctx)
			if err != nil {
				return err
			}
			if len(state.Orgs) != 1 || len(state.Providers) != 1 || state.Providers[0].Keys[0].Secret.Reveal() != "sk-FAKE-tx-1" {
				t.Errorf("Load inside Tx: %d orgs, %d providers", len(state.Orgs), len(state.Providers))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Tx: %v", err)
		}
		o, err := s.GetOrg(ctx, "kept")
		if err != nil {
			t.Fatalf("org after commit: %v", err)
		}
		if _, err := s.GetProvider(ctx, o.ID, "vllm"); err != nil {
			t.Fatalf("provider after commit: %v", err)
		}

		err = s.Tx(ctx, func(st store.Store) error {
			o := mustOrg(t, st, "gone")
			mustProvider(t, st, o.ID, "vllm")
			return errStop
		})
		if !errors.Is(err, errStop) {
			t.Fatalf("Tx = %v, want fn's error as it is", err)
		}
		if _, err := s.GetOrg(ctx, "gone"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("org after rollback: %v, want ErrNotFound", err)
		}
		if taken, err := s.SlugTaken(ctx, o.ID+1, "vllm"); err != nil || taken {
			t.Fatalf("slug of the rolled back provider: taken %v, %v", taken, err)
		}

		func() {
			defer func() {
				if recover() == nil {
					t.Error("the panic did not reach the caller")
				}
			}()
			_ = s.Tx(ctx, func(st store.Store) error {
				mustOrg(t, st, "panicked")
				panic("boom")
			})
		}()
		if _, err := s.GetOrg(ctx, "panicked"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("org after a panic: %v, want ErrNotFound", err)
		}
		// The store still works (on SQLite: its one connection came back).
		mustOrg(t, s, "after")
	})
}

// A nested Tx is a savepoint: its failure undoes its own writes only, and
// the outer transaction goes on, on PostgreSQL too, where a failed
// statement would otherwise poison it.
func TestTxNestedIsASavepoint(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		mustProvider(t, s, o.ID, "taken")

		err := s.Tx(ctx, func(st store.Store) error {
			mustProject(t, st, o.ID, "outer")
			err := st.Tx(ctx, func(in store.Store) error {
				mustProject(t, in, o.ID, "inner")
				return errStop
			})
			if !errors.Is(err, errStop) {
				t.Errorf("nested Tx = %v", err)
			}
			// A statement fails inside a nested Tx: a unique violation.
			err = st.Tx(ctx, func(in store.Store) error {
				return in.CreateProvider(ctx, &store.Provider{OrgID: o.ID, Slug: "taken", Name: "x", Kind: "vllm",
					BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured"})
			})
			var ce *store.ConflictError
			if !errors.As(err, &ce) || ce.What != "slug" {
				t.Errorf("duplicate slug in a nested Tx = %v, want a slug ConflictError", err)
			}
			// CreateProvider's own transaction is a savepoint too: its
			// failure leaves the transaction usable without a Tx around it.
			err = st.CreateProvider(ctx, &store.Provider{OrgID: o.ID, Slug: "taken", Name: "x", Kind: "vllm",
				BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured"})
			if !errors.As(err, &ce) {
				t.Errorf("duplicate slug in the transaction = %v", err)
			}
			if err := st.Tx(ctx, func(in store.Store) error {
				mustProject(t, in, o.ID, "nested-kept")
				return nil
			}); err != nil {
				t.Errorf("nested Tx: %v", err)
			}
			if _, err := st.GetProject(ctx, o.ID, "inner"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("project of the failed savepoint: %v, want ErrNotFound", err)
			}
			if err := st.Close(); err == nil {
				t.Error("Close of the transaction's store succeeded")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Tx: %v", err)
		}
		for name, want := range map[string]bool{"outer": true, "nested-kept": true, "inner": false} {
			_, err := s.GetProject(ctx, o.ID, name)
			if got := err == nil; got != want {
				t.Errorf("project %s exists = %v (%v), want %v", name, got, err, want)
			}
		}
	})
}
