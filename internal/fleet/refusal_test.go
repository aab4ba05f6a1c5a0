package fleet

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// TestControllerDeregistersARefusingBoxInOneSweep (issue 23): a box that
// refuses connections, and again when dialled a second time, is
// deregistered by the sweep that finds it, not after FailAfter sweeps,
// and the reading it feeds takes its provider out of readiness at once.
// A box that answers 503 still needs FailAfter sweeps.
func TestControllerDeregistersARefusingBoxInOneSweep(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		st := storetest.Open(t, d, nil)
		org, _, b, h := boxHost(t, st, vllm("--max-model-len", "32768"))
		b.health.Store(true)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		cache := readiness.New(readiness.Config{FailAfter: 3}, clock.System, nil, log)
		c := NewController(st, ControllerConfig{FailAfter: 3, Readings: cache}, log, nil)
		host := func() *store.Host {
			x, err := st.GetHost(ctx, org.ID, h.ID)
			must(t, err)
			return x
		}
		c.Sweep(ctx)
		x := host()
		if x.State != store.HostServing || x.ProviderID == 0 {
			t.Fatalf("healthy: %+v", x)
		}
		cache.Sync([]readiness.Provider{{ID: x.ProviderID, Kind: store.KindVLLM, BaseURL: b.srv.URL + "/v1"}})
		c.Sweep(ctx) // feeds a good reading

		// An error answer is one failure of FailAfter.
		b.health.Store(false)
		c.Sweep(ctx)
		if s := host().State; s != store.HostServing {
			t.Fatalf("one 503: %s", s)
		}
		if rs, _ := cache.Status(x.ProviderID); !rs.Ready {
			t.Fatalf("one 503 took the provider out of readiness: %+v", rs)
		}
		b.health.Store(true)
		c.Sweep(ctx)

		b.srv.Close() // the box dies: its port refuses connections
		c.Sweep(ctx)
		if s := host().State; s != store.HostDown {
			t.Fatalf("one sweep after the box began refusing: %s, want down", s)
		}
		if _, fail, _, _ := c.Health(h.ID); fail != 1 {
			t.Fatalf("failed probes %d, want 1", fail)
		}
		if rs, _ := cache.Status(x.ProviderID); rs.Ready {
			t.Fatalf("a confirmed refusal left the provider ready: %+v", rs)
		}
	})
}
