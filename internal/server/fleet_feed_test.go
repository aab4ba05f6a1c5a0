package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// TestFleetOneProberPerHost (issue 23 §2): a registered fleet host is
// probed once per sweep, by the controller, which feeds each reading to
// the readiness cache; the cache sends it no probe of its own while the
// readings keep coming. The boxes tell the two probers apart: the
// controller's GET /health carries no key, the cache's carries the
// provider's. The sweeps are the test's, paced well within the cache's
// grace (two metadata intervals), over several intervals.
func TestFleetOneProberPerHost(t *testing.T) {
	if testing.Short() {
		t.Skip("sweeps over several probe intervals")
	}
	spec, dir := storetest.Spec(t, "sqlite")
	cfg := fleetConfig(spec, dir)
	sweeps := make(chan time.Time)
	cfg.Fleet.Controller.Interval = time.Hour // swept by the test only
	cfg.Fleet.Controller.Ticks = sweeps
	const interval = time.Second
	cfg.Metadata.Interval = interval
	r := start(t, cfg)
	defer r.srv.Shutdown()
	const tok = "tok-FLEET-FAKE-0123456789"
	sweep := func() { sweeps <- time.Now() }

	const n = 3
	boxes := make([]*fakeVLLM, n)
	ids := make([]int64, n)
	for i := range boxes {
		boxes[i] = newFakeVLLM(t, "Qwen/Qwen3-8B")
		boxes[i].healthy.Store(true)
		code, body := r.call(t, "POST", "/admin/v1/orgs/default/hosts", tok, fmt.Sprintf(
			`{"ip":"127.0.0.1","port":%d,"model_name":"qwen3","recipe":`+recipeJSON+`}`, boxes[i].port(t), ""))
		if code != 201 {
			t.Fatalf("create host: %d %s", code, body)
		}
		h := decodeJSON[hostJSON](t, body)
		boxes[i].key.Store(h.APIKey)
		ids[i] = h.ID
	}
	testkit.Eventually(t, "every host serving", func() bool {
		sweep()
		for _, id := range ids {
			if r.host(t, tok, id).State != "serving" {
				return false
			}
		}
		return true
	})
	// Sweeps for one interval: the cache has its providers and has probed
	// each new one once.
	pace := time.NewTicker(interval / 10)
	defer pace.Stop()
	for range 10 {
		sweep()
		<-pace.C
	}
	sweep() // the last paced sweep is over once the next one is taken
	plain, keyed := make([]int64, n), make([]int64, n)
	for i, b := range boxes {
		plain[i], keyed[i] = b.health.Load()-b.healthKeyed.Load(), b.healthKeyed.Load()
	}

	// K sweeps over four intervals.
	const k = 40
	for range k {
		<-pace.C
		sweep()
	}
	testkit.Eventually(t, "the last sweep's probes", func() bool {
		for i, b := range boxes {
			if b.health.Load()-b.healthKeyed.Load()-plain[i] < k {
				return false
			}
		}
		return true
	})
	for i, b := range boxes {
		byController := b.health.Load() - b.healthKeyed.Load() - plain[i]
		byCache := b.healthKeyed.Load() - keyed[i]
		t.Logf("box %d over %d sweeps: %d GET /health from the controller, %d from the readiness cache", i, k, byController, byCache)
		// The sweep taken just before counting began may still have had
		// its probe under way: one more than k is that one's.
		if byController < k || byController > k+1 {
			t.Errorf("box %d: %d controller probes over %d sweeps, want one per sweep", i, byController, k)
		}
		// One may have been under way when counting began.
		if byCache > 1 {
			t.Errorf("box %d: the readiness cache probed it %d times over %d sweeps: two probers", i, byCache, k)
		}
	}
}
