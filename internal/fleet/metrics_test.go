package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// TestFleetMetrics: hosts by state, liveness age and revision skew per
// host, and drain durations, through pending → serving → draining →
// serving, on a manual clock.
func TestFleetMetrics(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, "sqlite", nil)
	org := &store.Org{Name: "acme"}
	must(t, st.CreateOrg(ctx, org))
	pj := &store.Project{OrgID: org.ID, Name: "default"}
	must(t, st.CreateProject(ctx, pj))
	b := newSkewBox(t)
	b.healthy.Store(false)
	h := &store.Host{OrgID: org.ID, ProjectID: pj.ID, IP: "127.0.0.1", Port: b.port(), ModelName: "qwen3",
		APIKey: secret.New("rh-k_secret"), Recipe: fleetapi.Recipe{VLLM: vllm("--max-model-len", "32768")}, DrainTimeout: time.Minute}
	must(t, st.CreateHost(ctx, h, nil))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reg := prometheus.NewRegistry()
	c := NewController(st, ControllerConfig{Registry: reg, Now: func() time.Time { return now }}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	id := strconv.FormatInt(h.ID, 10)
	org1 := strconv.FormatInt(org.ID, 10) // no OrgName: labelled by id
	states := func() map[string]float64 {
		out := map[string]float64{}
		for _, s := range liveStates {
			out[s] = gauge(t, reg, "rolter_fleet_hosts", map[string]string{"org": org1, "state": s})
		}
		return out
	}
	wantState := func(state string) {
		t.Helper()
		got := states()
		for s, v := range got {
			if (s == state) != (v == 1) || v > 1 {
				t.Fatalf("hosts by state %v, want the one host %s", got, state)
			}
		}
	}

	if n := testutil.CollectAndCount(c.collectorForTest(), "rolter_fleet_hosts"); n != 0 {
		t.Fatalf("%d host series before the first sweep", n)
	}
	c.Sweep(ctx) // booting
	wantState(store.HostPending)
	if testutil.CollectAndCount(c.collectorForTest(), "rolter_fleet_host_liveness_age_seconds") != 0 {
		t.Fatal("a liveness age before the box ever fetched")
	}
	must(t, st.TouchHosts(ctx, []int64{h.ID}, now.Add(-90*time.Second)))
	b.healthy.Store(true)
	c.Sweep(ctx) // registers; the listing was taken before, so the next one shows it
	c.CheckDrains(ctx)
	wantState(store.HostServing)
	if age := gauge(t, reg, "rolter_fleet_host_liveness_age_seconds", map[string]string{"org": org1, "host": id}); age != 90 {
		t.Fatalf("liveness age %v, want 90", age)
	}
	now = now.Add(30 * time.Second)
	if age := gauge(t, reg, "rolter_fleet_host_liveness_age_seconds", map[string]string{"org": org1, "host": id}); age != 120 {
		t.Fatalf("liveness age grows at scrape time: %v, want 120", age)
	}

	// The box reports its revision; a recipe change makes it skewed.
	x, err := st.GetHost(ctx, org.ID, h.ID)
	must(t, err)
	must(t, st.RecordHostReports(ctx, []store.HostReportEntry{{HostID: x.ID, Applied: Revision(x), Current: appliedOf(x)}}, now))
	x.Recipe = fleetapi.Recipe{VLLM: vllm("--max-model-len", "32768", "--gpu-memory-utilization", "0.8")}
	must(t, st.UpdateHost(ctx, x, nil))
	c.CheckDrains(ctx)
	revSkew := func() float64 {
		return gauge(t, reg, "rolter_fleet_host_skew", map[string]string{"org": org1, "host": id, "kind": "revision"})
	}
	if revSkew() != 1 {
		t.Fatal("revision skew not reported")
	}

	// Apply: the host drains (nothing in flight: never routed by a
	// request path here, so the deadline decides), restarts, serves.
	must(t, st.StartDrain(ctx, org.ID, h.ID, nil, now))
	c.CheckDrains(ctx)
	wantState(store.HostDraining)
	now = now.Add(61 * time.Second)
	c.CheckDrains(ctx) // deadline passed
	x, err = st.GetHost(ctx, org.ID, h.ID)
	must(t, err)
	must(t, st.RecordHostReports(ctx, []store.HostReportEntry{{HostID: x.ID, Applied: Revision(x), Current: appliedOf(x)}}, now))
	now = now.Add(4 * time.Second)
	c.Sweep(ctx) // the new revision serves: routed again
	c.CheckDrains(ctx)
	wantState(store.HostServing)
	if revSkew() != 0 {
		t.Fatal("revision skew after the restart")
	}
	want := fmt.Sprintf(`
# HELP rolter_fleet_drain_duration_seconds Fleet host drains before a restart, from their start until the box may restart, by outcome (idle: nothing left in flight; deadline: drain_timeout passed).
# TYPE rolter_fleet_drain_duration_seconds histogram
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="0.1"} 0
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="0.5"} 0
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="1"} 0
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="2.5"} 0
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="5"} 0
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="10"} 0
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="30"} 0
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="60"} 0
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="120"} 1
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="300"} 1
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="600"} 1
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="1800"} 1
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="3600"} 1
rolter_fleet_drain_duration_seconds_bucket{org=%[1]q,outcome="deadline",le="+Inf"} 1
rolter_fleet_drain_duration_seconds_sum{org=%[1]q,outcome="deadline"} 61
rolter_fleet_drain_duration_seconds_count{org=%[1]q,outcome="deadline"} 1
`, org1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rolter_fleet_drain_duration_seconds"); err != nil {
		t.Fatal(err)
	}
	if n := histCount(t, reg, "rolter_fleet_restart_out_of_routing_seconds"); n != 1 {
		t.Fatalf("out-of-routing observations %d, want 1", n)
	}
}

// appliedOf is the assignment a box reports running for x.
func appliedOf(x *store.Host) *store.AppliedAssignment {
	return &store.AppliedAssignment{Revision: Revision(x), Port: x.Port, Recipe: x.Recipe}
}

func (c *Controller) collectorForTest() prometheus.Collector { return collector{c} }

// gauge is the value of the series of name with labels in reg; it fails
// the test when there is none.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	m, ok := testkit.Series(t, reg, name, labels)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return m.GetGauge().GetValue()
}

func histCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}
