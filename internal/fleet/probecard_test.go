package fleet

import (
	"context"
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

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// staleReadings is a Readings whose Status reports a stale model while
// stale is set.
type staleReadings struct {
	recordedReadings
	stale atomic.Bool
}

func (r *staleReadings) Status(int64) (readiness.Status, bool) {
	if r.stale.Load() {
		return readiness.Status{Stale: map[string]string{"Qwen/Qwen3-8B": "model_not_found"}}, true
	}
	return readiness.Status{}, true
}

// A serving host's probe reads /v1/models only when it must: at
// registration, once CardEvery has passed, when the box reports another
// revision, after a failed probe, and while the request path holds a
// stale mark for it; otherwise it asks /health alone, on a connection of
// its own that it closes.
func TestProbeReadsCardWhenNeeded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		var health, models, conns atomic.Int32
		var sick atomic.Bool
		box := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/health":
				health.Add(1)
				if sick.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			case "/v1/models":
				models.Add(1)
				_, _ = w.Write([]byte(`{"data":[{"id":"Qwen/Qwen3-8B","max_model_len":8192}]}`))
			}
		}))
		box.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		box.Start()
		t.Cleanup(box.Close)
		u, _ := url.Parse(box.URL)
		port, _ := strconv.Atoi(u.Port())

		ctx := context.Background()
		st := storetest.Open(t, d, nil)
		org := &store.Org{Name: "default"}
		must(t, st.CreateOrg(ctx, org))
		pj := &store.Project{OrgID: org.ID, Name: "default"}
		must(t, st.CreateProject(ctx, pj))
		h := &store.Host{OrgID: org.ID, ProjectID: pj.ID, IP: "127.0.0.1", Port: port, ModelName: "qwen3",
			APIKey: secret.New("rh-probe-card-key"), Recipe: fleetapi.Recipe{VLLM: vllm("--max-model-len", "8192")}}
		must(t, st.CreateHost(ctx, h, nil))
		clk := clock.NewManual(time.Now())
		rd := &staleReadings{}
		c := NewController(st, ControllerConfig{Now: clk.Now, Readings: rd}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)

		step := func(what string, wantHealth, wantModels int32) {
			t.Helper()
			c.Sweep(ctx)
			if health.Load() != wantHealth || models.Load() != wantModels {
				t.Fatalf("%s: %d /health and %d /v1/models in all, want %d and %d", what, health.Load(), models.Load(), wantHealth, wantModels)
			}
		}
		step("registration", 1, 1)
		if x, err := st.GetHost(ctx, org.ID, h.ID); err != nil || x.State != store.HostServing {
			t.Fatalf("host not serving after its first probe: %v %v", x, err)
		}
		step("the next sweep", 2, 1)
		if n := conns.Load(); n != 2 {
			t.Fatalf("%d connections for two probes, want one each", n)
		}
		if r := rd.last(t); r.Health != nil || r.Models != nil || r.Status != http.StatusOK {
			t.Fatalf("the /health-only reading fed: %+v", r)
		}
		clk.Advance(time.Minute - time.Second)
		step("under CardEvery later", 3, 1)
		clk.Advance(time.Second)
		step("CardEvery later", 4, 2)
		step("right after", 5, 2)

		must(t, st.RecordHostReports(ctx, []store.HostReportEntry{{HostID: h.ID, Applied: "0123456789abcdef"}}, clk.Now()))
		step("another revision reported", 6, 3)
		step("that revision again", 7, 3)

		sick.Store(true)
		step("a failing /health", 8, 3)
		sick.Store(false)
		step("after the failure", 9, 4)
		step("healthy again", 10, 4)

		rd.stale.Store(true)
		step("a stale mark", 11, 5)
		rd.stale.Store(false)
		step("the mark cleared", 12, 5)

		if ok, fail, lastErr, _ := c.Health(h.ID); ok != 4 || fail != 0 {
			t.Fatalf("health ok %d fail %d (%s), want 4 good probes since the failure", ok, fail, lastErr)
		}
		if x, err := st.GetHost(ctx, org.ID, h.ID); err != nil || x.State != store.HostServing {
			t.Fatalf("host left serving: %v %v", x, err)
		}
	})
}
