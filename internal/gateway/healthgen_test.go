package gateway

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
)

// TestExtendedCooldownKeepsRoutableSets: healthGen, which makes every
// route rebuild its routable set, moves when a target begins cooling, not
// when a 429 merely extends the cooldown of a target already out (a 429
// storm on a keyless provider). Two requests reach the target before it
// cools; the first's 429 cools it (one bump), the second's, with a later
// Retry-After, extends the cooldown and bumps nothing.
func TestExtendedCooldownKeepsRoutableSets(t *testing.T) {
	h := newHarness(t, Config{})
	var arrivals atomic.Int64
	both := make(chan struct{})
	release := make(chan struct{})
	busy := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		switch arrivals.Add(1) {
		case 1:
			<-both
			w.Header().Set("Retry-After", "10")
		case 2:
			close(both)
			<-release
			w.Header().Set("Retry-After", "20")
		default:
			w.Header().Set("Retry-After", "30")
		}
		w.WriteHeader(http.StatusTooManyRequests)
	})
	id := h.provider("busy", busy.base(), store.ProviderSettings{})
	h.route("m", "round_robin", store.Target{ProviderID: id, Weight: 1})
	start := h.clock.Now()
	before := h.gw.healthGen.Load()

	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := h.post("/v1/chat/completions", `{"model":"m"}`)
			_ = resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	br := h.gw.state(targetID{id, ""}, false).breaker
	testkit.Eventually(t, "the first 429 to cool the target", func() bool {
		return br.Until().Equal(start.Add(10*time.Second)) && h.gw.healthGen.Load() == before+1
	})
	close(release)
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusTooManyRequests {
			t.Fatalf("request %d: status %d, want 429", i, s)
		}
	}
	if n := arrivals.Load(); n != 2 {
		t.Fatalf("the upstream saw %d requests, want 2", n)
	}
	if got, want := br.Until(), start.Add(20*time.Second); !got.Equal(want) {
		t.Fatalf("cooldown ends %v, want it extended to %v", got, want)
	}
	if got := h.gw.healthGen.Load(); got != before+1 {
		t.Fatalf("healthGen moved %d times, want once (the extension must not rebuild every route's set)", got-before)
	}
}
