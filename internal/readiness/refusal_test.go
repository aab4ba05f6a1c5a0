package readiness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
)

// refusedError is a real refused connection: a GET to a server that was
// closed.
func refusedError(t *testing.T) error {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	resp, err := http.Get(u) //nolint:noctx // a test's one dial to a closed port
	if err == nil {
		resp.Body.Close()
		t.Fatal("a closed server answered")
	}
	if !Refused(err) {
		t.Skipf("a closed port did not refuse: %v", err)
	}
	return err
}

// TestTriggeredProbeConfirmingRefusalIsDecisive (issue 23): a probe that
// ProbeSoon asked for (the gateway's connection was refused) and that
// finds the connection refused as well takes the provider out at once;
// an ordinary probe's refusal, or a triggered probe that meets an error
// answer or a timeout, only counts toward FailAfter.
func TestTriggeredProbeConfirmingRefusalIsDecisive(t *testing.T) {
	ctx := context.Background()
	eng := newEngine(t)
	eng.set("/health", 200, "")
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	c, _ := newTestCache(t, Config{FailAfter: 3, Timeout: 200 * time.Millisecond})
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1"},
		{ID: 2, Kind: store.KindVLLM, BaseURL: slow.URL + "/v1"}})
	e1, e2 := (*c.entries.Load())[1], (*c.entries.Load())[2]

	// A timeout on a triggered probe is no certainty.
	c.probe(ctx, e2, true)
	if st := mustStatus(t, c, 2); !st.Ready {
		t.Fatalf("one triggered probe that timed out took the provider out: %+v", st)
	}
	// Nor is an error answer.
	eng.set("/health", 503, "")
	c.probe(ctx, e1, true)
	if st := mustStatus(t, c, 1); !st.Ready {
		t.Fatalf("one triggered probe answered 503 took the provider out: %+v", st)
	}
	eng.set("/health", 200, "")
	c.probe(ctx, e1, false)

	eng.srv.Close() // nothing listens there now: connections are refused
	c.probe(ctx, e1, false)
	if st := mustStatus(t, c, 1); !st.Ready {
		t.Fatalf("one ordinary probe's refusal took the provider out: %+v", st)
	}
	c.probe(ctx, e1, true)
	st := mustStatus(t, c, 1)
	if st.Ready || st.Class != ClassHealthFailed {
		t.Fatalf("a triggered probe confirming a refusal: %+v", st)
	}
}

// TestFedConfirmedRefusalIsDecisive: a fed reading whose prober was
// refused twice in a row takes the provider out at once; a single refusal
// counts toward FailAfter.
func TestFedConfirmedRefusalIsDecisive(t *testing.T) {
	refused := refusedError(t)
	c, _ := newTestCache(t, Config{FailAfter: 3})
	base := "http://127.0.0.1:9/v1"
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: base}})
	c.Feed(1, Reading{BaseURL: base, Health: refused})
	if st := mustStatus(t, c, 1); !st.Ready {
		t.Fatalf("one refused reading: %+v", st)
	}
	c.Feed(1, Reading{BaseURL: base})
	c.Feed(1, Reading{BaseURL: base, Health: refused, RefusalConfirmed: true})
	if st := mustStatus(t, c, 1); st.Ready {
		t.Fatalf("a confirmed refusal: %+v", st)
	}
}

// TestChangeAnnouncedBeforeItsProbeReturns: when Feed (or a probe)
// returns, the OnChange function has run since its change, even when
// another change's call was running: the gateway's table agrees with
// readiness as soon as whatever changed it is done.
func TestChangeAnnouncedBeforeItsProbeReturns(t *testing.T) {
	c, _ := newTestCache(t, Config{FailAfter: 1})
	base := "http://127.0.0.1:9/v1"
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: base}, {ID: 2, Kind: store.KindVLLM, BaseURL: base}})
	entered, release := make(chan struct{}), make(chan struct{})
	var calls countingFn
	first := true
	c.OnChange(func() {
		if first { // calls never overlap: no race on first
			first = false
			close(entered)
			<-release
		}
		calls.call()
	})
	down := Reading{BaseURL: base, Health: refusedError(t)}
	go c.Feed(1, down)
	<-entered
	after := make(chan int, 1)
	go func() {
		c.Feed(2, down)
		after <- calls.n()
	}()
	testkit.Eventually(t, "provider 2's change recorded", func() bool { return !mustStatus(t, c, 2).Ready })
	close(release)
	if n := <-after; n < 2 {
		t.Fatalf("Feed returned after %d OnChange calls: the call for its change had not run", n)
	}
	if calls.overlap.Load() {
		t.Fatal("OnChange calls overlapped")
	}
}
