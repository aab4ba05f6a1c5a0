package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/cooldown"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
)

// TestRefusalsDoNotUseUpAttempts: a pool of three targets that refuse
// connections (closed listener ports) and one healthy target answers every
// request, although three attempts could all land on refusing targets.
// Between requests the clock passes every cooldown, so each request meets
// the refusing targets again (their half-open probes).
func TestRefusalsDoNotUseUpAttempts(t *testing.T) {
	for _, strategy := range []string{"weighted", "round_robin", "least_busy", "latency"} {
		t.Run(strategy, func(t *testing.T) {
			h := newHarness(t, Config{})
			ok := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
			var targets []store.Target
			for _, slug := range []string{"dead-a", "dead-b", "dead-c"} {
				targets = append(targets, store.Target{ProviderID: h.provider(slug, deadURL(t), store.ProviderSettings{}), Weight: 1})
			}
			// Last: round robin's first request tries the three refusing
			// targets before it.
			targets = append(targets, store.Target{ProviderID: h.provider("live", ok.base(), store.ProviderSettings{}), Weight: 1})
			h.route("m", strategy, targets...)
			const n = 150
			for i := range n {
				resp := h.post("/v1/chat/completions", `{"model":"m"}`)
				if body := readAll(t, resp); resp.StatusCode != 200 {
					t.Fatalf("request %d: status %d body %s", i, resp.StatusCode, body)
				}
				h.clock.Advance(cooldown.DefaultMax + time.Second)
			}
			if ok.count() != n {
				t.Fatalf("the live target served %d of %d", ok.count(), n)
			}
			recs := h.usage.all()
			maxAttempts := 0
			for _, r := range recs {
				maxAttempts = max(maxAttempts, r.Attempts)
			}
			if strategy == "round_robin" && recs[0].Attempts != 4 {
				t.Fatalf("round robin's first request: %d attempts, want 4 (three refusals, then the live target)", recs[0].Attempts)
			}
			if maxAttempts > 4 {
				t.Fatalf("a request made %d attempts over 4 distinct targets", maxAttempts)
			}
		})
	}
}

// TestRefusalBudgetIsCapped: refusals beyond MaxRefusals count as
// attempts, so a pool of dead hosts ends a request after MaxRefusals +
// MaxAttempts of them, with the class that ended it.
func TestRefusalBudgetIsCapped(t *testing.T) {
	h := newHarness(t, Config{})
	var targets []store.Target
	for i := range MaxRefusals + 6 {
		targets = append(targets, store.Target{ProviderID: h.provider("dead-"+string(rune('a'+i)), deadURL(t), store.ProviderSettings{}), Weight: 1})
	}
	h.route("m", "", targets...)
	resp := h.post("/v1/chat/completions", `{"model":"m"}`)
	body := readAll(t, resp)
	if resp.StatusCode != 502 || !strings.Contains(body, `"code":"upstream_unavailable"`) || !strings.Contains(body, "connect_error") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if a := h.usage.all()[0].Attempts; a != MaxRefusals+3 {
		t.Fatalf("%d attempts, want MaxRefusals+MaxAttempts = %d", a, MaxRefusals+3)
	}
}

// gatedDialer dials like net.Dialer, except that while hold is set a dial
// waits for open (or its context): the test decides when a probe reaches
// the network.
type gatedDialer struct {
	hold    atomic.Bool
	waiting atomic.Int64
	open    chan struct{}
}

func (g *gatedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if g.hold.Load() {
		g.waiting.Add(1)
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// TestRefusalTakesTargetOutAndProbes: the first refused connection takes
// the target out of routing for every request at once (not after the
// breaker's threshold), and asks the readiness cache for a probe of the
// provider now, which reaches the upstream once it listens again. The
// target comes back through its half-open probe.
func TestRefusalTakesTargetOutAndProbes(t *testing.T) {
	h := newHarness(t, Config{})
	var boxChats, boxHealth atomic.Int64
	box := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.URL.Path == "/health" {
			boxHealth.Add(1)
		}
		_, _ = io.WriteString(w, `{}`)
	})
	live := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	boxID := h.provider("box", box.base(), store.ProviderSettings{})
	liveID := h.provider("live", live.base(), store.ProviderSettings{})
	h.route("m", "round_robin", store.Target{ProviderID: boxID, Weight: 1}, store.Target{ProviderID: liveID, Weight: 1})

	// A readiness cache probing at an interval far longer than the test:
	// only the first probe and ProbeSoon's reach the upstreams.
	gate := &gatedDialer{open: make(chan struct{})}
	// No kept-alive connection: every probe dials, through the gate.
	tr := &http.Transport{DialContext: gate.DialContext, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	probes := readiness.New(readiness.Config{Interval: time.Hour, Timeout: time.Minute, FailAfter: 1}, h.clock, &http.Client{Transport: tr}, nil)
	var ps []readiness.Provider
	h.snap.Current().EachOrg(func(o *snapshot.Org) {
		for _, p := range o.Providers.All() {
			ps = append(ps, readiness.Provider{ID: p.ID, Kind: p.Kind, BaseURL: p.BaseURL})
		}
	})
	probes.Sync(ps)
	h.gw.ready, h.gw.probes = probes, probes // before any request is served
	probes.OnChange(h.gw.Refresh)
	h.gw.Refresh()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { probes.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	testkit.Eventually(t, "the first probe of the box", func() bool { return boxHealth.Load() == 1 })

	// The box dies: its port refuses connections.
	addr := strings.TrimPrefix(strings.TrimSuffix(box.base(), "/v1"), "http://")
	box.Close()
	gate.hold.Store(true)
	resp := h.post("/v1/chat/completions", `{"model":"m"}`)
	if readAll(t, resp); resp.StatusCode != 200 || h.usage.all()[0].Attempts != 2 {
		t.Fatalf("status %d, %d attempts; want the refusal, then the live target", resp.StatusCode, h.usage.all()[0].Attempts)
	}
	br := h.gw.state(targetID{boxID, ""}, false).breaker
	if st := br.State(); st != cooldown.StateCooling {
		t.Fatalf("after one refusal the box's breaker is %s, want cooling", st)
	}
	testkit.Eventually(t, "the probe ProbeSoon asked for", func() bool { return gate.waiting.Load() >= 1 })
	for range 30 {
		resp := h.post("/v1/chat/completions", `{"model":"m"}`)
		if readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	for i, r := range h.usage.all()[1:] {
		if r.Attempts != 1 || r.ProviderSlug != "live" {
			t.Fatalf("request %d after the refusal: %d attempts, provider %s; the box must be out of routing", i+1, r.Attempts, r.ProviderSlug)
		}
	}
	if n := counterValue(t, h.reg, "rolter_upstream_refusals_total", map[string]string{"provider": "box"}); n != 1 {
		t.Fatalf("%v refusals counted, want 1", n)
	}

	// The box comes back on the same port; the pending probe reaches it.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the box's port was taken meanwhile: %v", err)
	}
	var probed atomic.Bool
	revived := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			probed.Store(true)
		case "/v1/chat/completions":
			boxChats.Add(1)
		}
		_, _ = io.WriteString(w, `{}`)
	})}}
	revived.Start()
	t.Cleanup(revived.Close)
	close(gate.open)
	testkit.Eventually(t, "the probe to reach the revived box", probed.Load)
	if st, _ := probes.Status(boxID); !st.Ready {
		t.Fatalf("the box is not ready after its probe: %+v", st)
	}
	// Its cooldown ends: the half-open probe brings it back.
	h.clock.Advance(br.Until().Sub(h.clock.Now()))
	for range 4 {
		resp := h.post("/v1/chat/completions", `{"model":"m"}`)
		if readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if boxChats.Load() == 0 || br.State() != cooldown.StateClosed {
		t.Fatalf("the box served %d requests after its cooldown; breaker %s", boxChats.Load(), br.State())
	}
}
