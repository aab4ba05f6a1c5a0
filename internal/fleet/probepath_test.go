package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// failingTransport fails every request, counting them.
type failingTransport struct{ n atomic.Int32 }

func (f *failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	f.n.Add(1)
	return nil, errors.New("the client was used")
}

// With Dial set, probes that close their connection (an interval over the
// idle timeout) go through an h1client transport over it, not through Client; at a
// shorter interval Client sends them, keeping its connections.
func TestControllerProbePath(t *testing.T) {
	var conns atomic.Int32
	box := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			w.Write([]byte(`{"data":[{"id":"Qwen/Qwen3-8B","max_model_len":8192}]}`))
		}
	}))
	box.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	box.Start()
	defer box.Close()
	u, _ := url.Parse(box.URL)
	port, _ := strconv.Atoi(u.Port())
	ctx := context.Background()
	st := storetest.Open(t, "sqlite", nil)
	org := &store.Org{Name: "default"}
	must(t, st.CreateOrg(ctx, org))
	pj := &store.Project{OrgID: org.ID, Name: "default"}
	must(t, st.CreateProject(ctx, pj))
	h := &store.Host{OrgID: org.ID, ProjectID: pj.ID, IP: "127.0.0.1", Port: port, ModelName: "qwen3",
		APIKey: secret.New("probe-path-host-key"), Recipe: fleetapi.Recipe{VLLM: vllm()}}
	must(t, st.CreateHost(ctx, h, nil))
	var d net.Dialer
	for _, tc := range []struct {
		name       string
		interval   time.Duration
		wantClient bool
	}{{"closing", 10 * time.Second, false}, {"keep-alive", 2 * time.Second, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ft := &failingTransport{}
			before := conns.Load()
			c := NewController(st, ControllerConfig{Interval: tc.interval, Client: &http.Client{Transport: ft}, Dial: d.DialContext, FailAfter: 1},
				slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			c.Sweep(ctx)
			ok, fail, lastErr, _ := c.Health(h.ID)
			if tc.wantClient {
				if ft.n.Load() == 0 || fail != 1 {
					t.Fatalf("the client was not used: %d requests, ok %d fail %d %q", ft.n.Load(), ok, fail, lastErr)
				}
				return
			}
			if ft.n.Load() != 0 || ok != 1 {
				t.Fatalf("probe: %d client requests, ok %d fail %d %q", ft.n.Load(), ok, fail, lastErr)
			}
			if n := conns.Load() - before; n != 1 {
				t.Errorf("%d connections for /health and /v1/models; want one", n)
			}
		})
	}
}
