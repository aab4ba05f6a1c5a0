package readiness

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// TestProbeClosesOnlyItsLastRequest (issue 23 §2): with an Interval over
// ProbeIdleTimeout, a self-hosted server's probe asks to close the
// connection on its last request only (its earlier ones reuse the
// connection), and a hosted API's probe never does: it keeps its
// connection, a TLS handshake being dearer than one idle connection. At a
// short Interval nothing is closed. The same holds with Config.Dial (issue
// 21), where the probes go through the cache's h1client transport, and a
// probe dials once: its requests before the last reuse the connection.
func TestProbeClosesOnlyItsLastRequest(t *testing.T) {
	for _, dial := range []bool{false, true} {
		t.Run(fmt.Sprintf("dial=%v", dial), func(t *testing.T) { testProbeClosesOnlyItsLastRequest(t, dial) })
	}
}

func testProbeClosesOnlyItsLastRequest(t *testing.T, dial bool) {
	const (
		health = "GET /health"
		models = "GET /v1/models"
		props  = "GET /props"
	)
	cases := []struct {
		name     string
		kind     string
		upstream bool
		interval time.Duration
		closed   map[string]bool // the requests the probe sends: whether each closes
	}{
		{"vllm configured", store.KindVLLM, false, time.Minute, map[string]bool{health: true}},
		{"vllm upstream", store.KindVLLM, true, time.Minute, map[string]bool{health: false, models: true}},
		{"sglang upstream", store.KindSGLang, true, time.Minute, map[string]bool{health: false, models: true}},
		{"llamacpp upstream", store.KindLlamaCpp, true, time.Minute, map[string]bool{health: false, models: false, props: true}},
		{"openai", store.KindOpenAI, false, time.Minute, map[string]bool{models: false}},
		{"openai upstream", store.KindOpenAI, true, time.Minute, map[string]bool{models: false}},
		{"vllm upstream, short interval", store.KindVLLM, true, time.Second, map[string]bool{health: false, models: false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := newEngine(t)
			eng.set("/health", 200, llamaHealthOK)
			eng.set("/v1/models", 200, vllmModels(vllmCard("m", 8192)))
			if tc.kind == store.KindLlamaCpp {
				eng.set("/v1/models", 200, llamaModels("m", 8192, 32768))
				eng.set("/props", 200, llamaPropsBody("m", 8192, 1, false, false, "b1"))
			}
			cfg := Config{Interval: tc.interval}
			var dials atomic.Int32
			if dial {
				cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
					dials.Add(1)
					return (&net.Dialer{}).DialContext(ctx, network, addr)
				}
			}
			c, _ := newTestCache(t, cfg)
			if h1 := c.probes != nil; h1 != (dial && tc.interval > ProbeIdleTimeout) {
				t.Fatalf("probes through h1client: %v", h1)
			}
			t.Cleanup(c.closeIdle)
			c.Sync([]Provider{{ID: 1, Kind: tc.kind, BaseURL: eng.url() + "/v1", Upstream: tc.upstream, Credential: secretKey}})
			c.ProbeAll(context.Background())
			if st := mustStatus(t, c, 1); !st.Ready {
				t.Fatalf("probe failed: %+v", st)
			}
			if got := eng.requests(); len(got) != len(tc.closed) {
				t.Fatalf("requests %v, want %v", got, tc.closed)
			}
			for key, want := range tc.closed {
				h := eng.lastHeaders(key)
				if h == nil {
					t.Fatalf("no %s", key)
				}
				if got := h.Get("Connection") == "close"; got != want {
					t.Errorf("%s: Connection: close is %v, want %v", key, got, want)
				}
			}
			if c.probes != nil && dials.Load() != 1 {
				t.Errorf("the probe dialled %d times, want once", dials.Load())
			}
		})
	}
}
