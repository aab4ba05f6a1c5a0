package readiness

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

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
	c, _ := newTestCache(t, Config{Interval: 50 * time.Millisecond, FailAfter: 2})
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

	// Run with readings every interval: no probe of its own.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	stop := make(chan struct{})
	fed := make(chan struct{})
	var readings atomic.Int64
	go func() {
		defer close(fed)
		tk := time.NewTicker(c.cfg.Interval / 2)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				c.Feed(1, Reading{BaseURL: base})
				readings.Add(1)
			}
		}
	}()
	// Ten intervals of readings; FeedGrace is two.
	testkit.Eventually(t, "ten intervals of readings", func() bool { return readings.Load() >= 20 })
	if n := eng.hits("GET /health"); n != 0 {
		t.Fatalf("Run probed a fed provider %d times", n)
	}
	close(stop)
	<-fed
	testkit.Eventually(t, "Run probing again once the readings stop", func() bool { return eng.hits("GET /health") > 0 })
}
