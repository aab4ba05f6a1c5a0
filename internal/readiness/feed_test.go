package readiness

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
)

// TestFeedStandsInForProbes (issue 23 §2): readings another prober feeds
// count like the cache's own probes (FailAfter, recovery, the model list
// for stale marks), and while they keep coming Run sends the provider no
// probe of its own; when they stop, Run probes it again.
func TestFeedStandsInForProbes(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	ticks := make(chan time.Time)
	clk := clock.NewManual(testEpoch)
	c, _ := newClockedCache(t, Config{Interval: 10 * time.Second, FailAfter: 2, Ticks: ticks}, clk)
	base := eng.url() + "/v1"
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: base}})

	down := Reading{BaseURL: base, Health: errors.New("connection refused")}
	if !c.Feed(1, down) {
		t.Fatal("a reading of the provider's URL was not recorded")
	}
	if st := mustStatus(t, c, 1); !st.Ready || st.LastProbe.IsZero() {
		t.Fatalf("one failed reading: %+v", st)
	}
	c.Feed(1, down)
	if st := mustStatus(t, c, 1); st.Ready || st.Class != ClassHealthFailed {
		t.Fatalf("FailAfter failed readings: %+v", st)
	}
	if c.Feed(1, Reading{BaseURL: "http://elsewhere:8000/v1"}) || c.Feed(2, Reading{BaseURL: base}) {
		t.Fatal("a reading of another URL or provider was recorded")
	}
	c.Feed(1, Reading{BaseURL: base, Models: []byte(`{"data":[{"id":"m"}]}`)})
	if st := mustStatus(t, c, 1); !st.Ready {
		t.Fatalf("a good reading: %+v", st)
	}
	// A stale mark is cleared by a reading whose list has the model,
	// without a request of the cache's own.
	c.MarkStale(1, "m", "404 model_not_found")
	c.Feed(1, Reading{BaseURL: base})
	if st := mustStatus(t, c, 1); len(st.Stale) != 1 {
		t.Fatalf("a reading without the list cleared the mark: %+v", st.Stale)
	}
	c.Feed(1, Reading{BaseURL: base, Models: []byte(`{"data":[{"id":"m"}]}`)})
	if st := mustStatus(t, c, 1); len(st.Stale) != 0 {
		t.Fatalf("a reading listing the model kept the mark: %+v", st.Stale)
	}
	if n := eng.hits("GET /health") + eng.hits("GET /v1/models"); n != 0 {
		t.Fatalf("fed readings sent %d requests", n)
	}

	// Run with a reading every half interval, on the cache's clock: no
	// probe of its own. Each tick is sent twice: the second is received
	// only once Run is done with what the first made due.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	tick := func() {
		for range 2 {
			select {
			case ticks <- time.Time{}:
			case <-time.After(30 * time.Second):
				t.Fatal("Run took no tick")
			}
		}
	}
	// Ten intervals of readings; FeedGrace is two.
	for range 20 {
		clk.Advance(c.cfg.Interval / 2)
		c.Feed(1, Reading{BaseURL: base})
		tick()
		// A probe holds a slot from when Run starts it until it ends.
		if n := eng.hits("GET /health"); n != 0 || len(c.sem) != 0 {
			t.Fatalf("Run probed a fed provider: %d requests, %d probes running", n, len(c.sem))
		}
	}
	// The readings stop: past the grace (and the recheck's jitter), Run
	// probes the provider again.
	clk.Advance(c.FeedGrace() + c.cfg.Interval)
	tick()
	testkit.Eventually(t, "Run probing again once the readings stop", func() bool { return eng.hits("GET /health") > 0 })
}
