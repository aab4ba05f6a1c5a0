package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// A batch of hosts is inserted in one transaction: every host or none.
// check sees each pool once, with the hosts already in it and the batch's
// hosts joining it; an insert that fails names its entry.
func TestCreateHostsBatch(t *testing.T) {
	sealer, err := secret.NewSealer(secret.New("578931627be35d183c459955f5e2efe4753026a31f6efda5c9b1143434df84ad"))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, sealer)
		o := mustOrg(t, s, "acme")
		pj := mustProject(t, s, o.ID, "fleet")
		other := mustProject(t, s, o.ID, "other")
		first := &store.Host{OrgID: o.ID, ProjectID: pj.ID, IP: "10.0.0.1", Port: 8000, ModelName: "qwen3",
			APIKey: secret.New("rh-first"), Recipe: testRecipe("Qwen/Qwen3-8B")}
		if err := s.CreateHost(ctx, first, nil); err != nil {
			t.Fatal(err)
		}
		batch := func(n int) []*store.Host {
			hs := make([]*store.Host, n)
			for i := range hs {
				p, model := pj.ID, "qwen3"
				if i%2 == 1 {
					p, model = other.ID, "llama"
				}
				hs[i] = &store.Host{OrgID: o.ID, ProjectID: p, IP: fmt.Sprintf("10.0.1.%d", i+1), Port: 8000, ModelName: model,
					APIKey: secret.New(fmt.Sprintf("rh-%d", i)), Recipe: testRecipe("Qwen/Qwen3-8B")}
			}
			return hs
		}
		count := func() int {
			t.Helper()
			var n int
			if err := s.SQL().QueryRow(`SELECT COUNT(*) FROM hosts`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}

		type seen struct{ pool, joining int }
		var calls []seen
		hs := batch(5)
		if err := s.CreateHosts(ctx, hs, func(pool []store.Host, joining []*store.Host) error {
			calls = append(calls, seen{len(pool), len(joining)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// Two pools: qwen3 in fleet (holding first, joined by 3) and llama
		// in other (empty, joined by 2), in the order of their first host.
		if fmt.Sprint(calls) != "[{1 3} {0 2}]" {
			t.Fatalf("check calls = %v", calls)
		}
		for i, h := range hs {
			got, err := s.GetHost(ctx, o.ID, h.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.IP != h.IP || got.State != store.HostPending || got.APIKey.Reveal() != fmt.Sprintf("rh-%d", i) || got.DrainTimeout != store.DefaultDrainTimeout {
				t.Fatalf("host %d: %+v", i, got)
			}
		}
		if n := count(); n != 6 {
			t.Fatalf("%d hosts after the batch", n)
		}

		// A check that refuses aborts the whole batch.
		refused := errors.New("refused")
		fresh := batch(4)
		for i, h := range fresh {
			h.IP = fmt.Sprintf("10.0.2.%d", i+1)
		}
		if err := s.CreateHosts(ctx, fresh, func([]store.Host, []*store.Host) error { return refused }); !errors.Is(err, refused) {
			t.Fatalf("refused batch: %v", err)
		}
		// An address already held, in the third entry, fails the batch
		// naming that entry; the entries before it are not kept.
		fresh[2].IP = hs[0].IP
		var ee *store.EntryError
		var ce *store.ConflictError
		if err := s.CreateHosts(ctx, fresh, nil); !errors.As(err, &ee) || ee.Index != 2 || !errors.As(err, &ce) || ce.What != "host address" {
			t.Fatalf("batch with a taken address: %v", err)
		}
		if n := count(); n != 6 {
			t.Fatalf("%d hosts after refused batches, want 6", n)
		}
	})
}
